"""Quota shared by every gateway replica: one Redis hash per tenant, one field per second.

Errors (RedisError, a timeout) propagate: gateway.quota.guarded decides what an
outage means (fail open, closed, or a local limiter) and bounds the wait.

Both operations are single Lua scripts, so they are atomic, and they read the
clock with Redis ``TIME``: replicas with skewed clocks still agree on the window.
(Redis >= 5 replicates script effects, which makes TIME-then-write legal.)
The key expires one window after the last charge, so idle tenants cost nothing.
"""

import redis.asyncio as redis

from gateway.quota.limiter import (
    UNLIMITED,
    WINDOW_SECONDS,
    ChargesByCost,
    QuotaVerdict,
    Reservation,
)
from specwire import TenantSpec

# KEYS[1] tenant hash; ARGV limit, window, reserve. Returns {used, retry_after, second}
# as strings (Lua numbers returned to Redis are truncated to integers). An admitted
# request's reserve is booked in the same script, so concurrent admissions see it.
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cutoff = tonumber(t[1]) - window
local fields = redis.call('HGETALL', KEYS[1])
local used = 0
local live = {}
for i = 1, #fields, 2 do
  local second = tonumber(fields[i])
  local amount = tonumber(fields[i + 1])
  if second <= cutoff then
    redis.call('HDEL', KEYS[1], fields[i])
  else
    used = used + amount
    live[#live + 1] = {second, amount}
  end
end
local retry = 0
if used >= limit then
  table.sort(live, function(a, b) return a[1] < b[1] end)
  local remaining = used
  retry = window
  for _, bucket in ipairs(live) do
    remaining = remaining - bucket[2]
    if remaining < limit then
      retry = math.max(bucket[1] + window - now, 0)
      break
    end
  end
end
local reserve = tonumber(ARGV[3])
if used < limit and reserve > 0 then
  redis.call('HINCRBYFLOAT', KEYS[1], t[1], ARGV[3])
  redis.call('EXPIRE', KEYS[1], window + 1)
end
return {tostring(used), tostring(retry), t[1]}
"""

# KEYS[1] tenant hash; ARGV second, delta, window. A reservation's second that left the
# window is not touched; a second never goes below 0.
_SETTLE = """
local t = redis.call('TIME')
if tonumber(ARGV[1]) <= tonumber(t[1]) - tonumber(ARGV[3]) then
  return 0
end
local value = tonumber(redis.call('HINCRBYFLOAT', KEYS[1], ARGV[1], ARGV[2]))
if value < 0 then
  redis.call('HSET', KEYS[1], ARGV[1], '0')
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]) + 1)
return 1
"""

# KEYS[1] tenant hash; ARGV cost, window.
_CHARGE = """
local t = redis.call('TIME')
redis.call('HINCRBYFLOAT', KEYS[1], t[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]) + 1)
return 1
"""


class RedisQuotaLimiter(ChargesByCost):
    def __init__(
        self,
        client: "redis.Redis",
        *,
        window_s: int = WINDOW_SECONDS,
        key_prefix: str = "specroute:quota",
    ) -> None:
        self.client = client
        self.window_s = window_s
        self.key_prefix = key_prefix
        self._admit = client.register_script(_ADMIT)
        self._charge = client.register_script(_CHARGE)
        self._settle = client.register_script(_SETTLE)

    @classmethod
    def from_url(cls, url: str, **kw: object) -> "RedisQuotaLimiter":
        # NOTE: a bounded, blocking pool: under a burst, requests queue for one of a few
        # connections instead of each opening its own (which overwhelms Redis and times
        # out); short timeouts because a quota check sits on every request's path.
        pool: redis.BlockingConnectionPool = redis.BlockingConnectionPool.from_url(
            url,
            max_connections=32,
            # Longest wait for a free pooled connection. Generous: a burst on a busy
            # host can hold all connections for a while, and a charge that gives up
            # here is lost (seen at 1 s with 200 concurrent charges on 2 loaded cores).
            timeout=5.0,
            socket_connect_timeout=1.0,
            socket_timeout=1.0,
        )
        return cls(redis.Redis(connection_pool=pool), **kw)  # type: ignore[arg-type]

    def key(self, tenant: TenantSpec) -> str:
        return f"{self.key_prefix}:{tenant.id}"

    async def admit(self, tenant: TenantSpec, reserve: float = 0.0) -> QuotaVerdict:
        limit = tenant.quota.weighted_tokens_per_minute
        if limit is None:
            return UNLIMITED
        used_s, retry_s, second_s = await self._admit(
            keys=[self.key(tenant)], args=[limit, self.window_s, repr(float(reserve))]
        )
        used = float(used_s)
        if used < limit:
            reservation = (
                Reservation(tenant.id, int(second_s), float(reserve)) if reserve > 0 else None
            )
            return QuotaVerdict(
                allowed=True, retry_after_s=0.0, used=used, limit=limit, reservation=reservation
            )
        return QuotaVerdict(allowed=False, retry_after_s=float(retry_s), used=used, limit=limit)

    async def charge_cost(self, tenant: TenantSpec, cost: float) -> None:
        if cost <= 0 or tenant.quota.weighted_tokens_per_minute is None:
            return
        await self._charge(keys=[self.key(tenant)], args=[repr(cost), self.window_s])

    async def settle(self, reservation: Reservation, cost: float) -> None:
        key = f"{self.key_prefix}:{reservation.tenant_id}"
        delta = cost - reservation.amount
        await self._settle(keys=[key], args=[reservation.second, repr(delta), self.window_s])

    async def aclose(self) -> None:
        # types-redis predates aclose (redis>=5); close() is deprecated there. A pool
        # passed in explicitly is not closed by the client, hence the disconnect.
        await self.client.aclose()
        await self.client.connection_pool.disconnect()
