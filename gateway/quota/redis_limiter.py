"""Quota shared by every gateway replica: one Redis hash per tenant, one field per second.

Errors (RedisError, a timeout) propagate: gateway.quota.guarded decides what an
outage means (fail open, closed, or a local limiter) and bounds the wait.

Both operations are single Lua scripts, so they are atomic, and they read the
clock with Redis ``TIME``: replicas with skewed clocks still agree on the window.
(Redis >= 5 replicates script effects, which makes TIME-then-write legal.)
The key expires one window after the last charge, so idle tenants cost nothing.

A call can time out after Redis has run it, so every booking is named by a token the
gateway draws: an admission or a charge records its token in a per-second hash
(``<key>:r:<second>``, expiring with the window), a settle applies only while its
token is there, and `reconcile` replays what the gateway could not confirm (cancel an
admission, retry a charge or a settle) exactly once whether or not the first try ran.
A cancel that finds nothing leaves a tombstone (``<key>:x``) so an admission that
reaches Redis late books nothing. The scripts derive these keys from the tenant's key
(one Redis, not a cluster).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import redis.asyncio as redis

from gateway.quota.limiter import (
    UNLIMITED,
    WINDOW_SECONDS,
    ChargesByCost,
    QuotaVerdict,
    Reservation,
)
from specwire import TenantSpec

# Lua shared by the scripts below (prepended to each); KEYS[1] is the tenant's hash.
# add: change a second's total by delta, never below 0, the hash living one window on;
# record: name a booking, token -> value in that second's record hash, kept as long.
_BOOKINGS_LUA = """
local function add(second, delta, window)
  local value = tonumber(redis.call('HINCRBYFLOAT', KEYS[1], second, delta))
  if value < 0 then
    redis.call('HSET', KEYS[1], second, '0')
  end
  redis.call('EXPIRE', KEYS[1], window + 1)
end
local function record(second, token, value, window)
  local key = KEYS[1] .. ':r:' .. second
  redis.call('HSET', key, token, value)
  redis.call('EXPIRE', key, window + 1)
end
"""

# KEYS[1] tenant hash; ARGV limit, window, reserve. Returns {used, retry_after, second}
# as strings (Lua numbers returned to Redis are truncated to integers). An admitted
# request's reserve is booked in the same script, so concurrent admissions see it.
_ADMIT = (
    _BOOKINGS_LUA
    + """
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
local token = ARGV[4]
if used < limit and reserve > 0
    and (token == '' or redis.call('HEXISTS', KEYS[1] .. ':x', token) == 0) then
  add(t[1], ARGV[3], window)
  if token ~= '' then
    record(t[1], token, ARGV[3], window)
  end
end
return {tostring(used), tostring(retry), t[1]}
"""
)

# KEYS[1] tenant hash; ARGV second, delta, window, token. A reservation's second that
# left the window is not touched, nor one whose token is gone (settled or cancelled);
# a second never goes below 0.
_SETTLE = (
    _BOOKINGS_LUA
    + """
local t = redis.call('TIME')
if tonumber(ARGV[1]) <= tonumber(t[1]) - tonumber(ARGV[3]) then
  return 0
end
if ARGV[4] ~= '' and redis.call('HDEL', KEYS[1] .. ':r:' .. ARGV[1], ARGV[4]) == 0 then
  return 0
end
add(ARGV[1], ARGV[2], tonumber(ARGV[3]))
return 1
"""
)

# KEYS[1] tenant hash; ARGV cost, window, token.
_CHARGE = (
    _BOOKINGS_LUA
    + """
local t = redis.call('TIME')
add(t[1], ARGV[1], tonumber(ARGV[2]))
if ARGV[3] ~= '' then
  record(t[1], ARGV[3], 'c', tonumber(ARGV[2]))
end
return 1
"""
)

# KEYS[1] tenant hash; ARGV[1] window, then per operation: kind, token, second, amount.
# cancel: undo the admission booked under token, or leave a tombstone if none was;
# charge: add amount now unless token was already charged; settle: add amount (the
# delta) to second if the reservation's token is still there. Returns how many applied.
_RECONCILE = (
    _BOOKINGS_LUA
    + """
local now = tonumber(redis.call('TIME')[1])
local window = tonumber(ARGV[1])
local cutoff = now - window
local function find(token)
  for s = now, cutoff + 1, -1 do
    local record = KEYS[1] .. ':r:' .. s
    local value = redis.call('HGET', record, token)
    if value then
      return s, record, value
    end
  end
  return nil
end
local applied = 0
local tombstones = KEYS[1] .. ':x'
for i = 2, #ARGV, 4 do
  local kind, token, second, amount = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  if kind == 'cancel' then
    local s, record, value = find(token)
    if s then
      redis.call('HDEL', record, token)
      add(s, -tonumber(value), window)
      applied = applied + 1
    else
      redis.call('HSET', tombstones, token, now)
      redis.call('EXPIRE', tombstones, window + 1)
    end
  elseif kind == 'charge' then
    if not find(token) then
      add(now, amount, window)
      record(now, token, 'c', window)
      applied = applied + 1
    end
  elseif kind == 'settle' then
    if second > cutoff and redis.call('HDEL', KEYS[1] .. ':r:' .. second, token) == 1 then
      add(second, amount, window)
      applied = applied + 1
    end
  end
end
local stones = redis.call('HGETALL', tombstones)
for i = 1, #stones, 2 do
  if tonumber(stones[i + 1]) <= cutoff then
    redis.call('HDEL', tombstones, stones[i])
  end
end
return applied
"""
)


@dataclass(frozen=True)
class StoreOp:
    """A call whose outcome the gateway does not know, to replay with `reconcile`:
    cancel the admission booked under `token`, charge `amount` under `token`, or
    settle the reservation `token` at `second` by `amount` (the delta)."""

    kind: Literal["cancel", "charge", "settle"]
    token: str
    second: int = 0
    amount: float = 0.0


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
        self._reconcile = client.register_script(_RECONCILE)

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

    async def admit(
        self, tenant: TenantSpec, reserve: float = 0.0, *, token: str = ""
    ) -> QuotaVerdict:
        limit = tenant.quota.weighted_tokens_per_minute
        if limit is None:
            return UNLIMITED
        used_s, retry_s, second_s = await self._admit(
            keys=[self.key(tenant)], args=[limit, self.window_s, repr(float(reserve)), token]
        )
        used = float(used_s)
        if used < limit:
            reservation = (
                Reservation(tenant.id, int(second_s), float(reserve), token=token)
                if reserve > 0
                else None
            )
            return QuotaVerdict(
                allowed=True, retry_after_s=0.0, used=used, limit=limit, reservation=reservation
            )
        return QuotaVerdict(allowed=False, retry_after_s=float(retry_s), used=used, limit=limit)

    async def charge_cost(self, tenant: TenantSpec, cost: float, *, token: str = "") -> None:
        if cost <= 0 or tenant.quota.weighted_tokens_per_minute is None:
            return
        await self._charge(keys=[self.key(tenant)], args=[repr(cost), self.window_s, token])

    async def settle(self, reservation: Reservation, cost: float) -> None:
        key = f"{self.key_prefix}:{reservation.tenant_id}"
        delta = cost - reservation.amount
        await self._settle(
            keys=[key], args=[reservation.second, repr(delta), self.window_s, reservation.token]
        )

    async def reconcile(self, tenant_id: int, ops: Sequence[StoreOp]) -> int:
        """Replay `ops` for one tenant in one atomic script; how many took effect."""
        args: list[str | int] = [self.window_s]
        for op in ops:
            args += [op.kind, op.token, op.second, repr(float(op.amount))]
        applied = await self._reconcile(keys=[f"{self.key_prefix}:{tenant_id}"], args=args)
        return int(applied)

    async def aclose(self) -> None:
        # types-redis predates aclose (redis>=5); close() is deprecated there. A pool
        # passed in explicitly is not closed by the client, hence the disconnect.
        await self.client.aclose()
        await self.client.connection_pool.disconnect()
