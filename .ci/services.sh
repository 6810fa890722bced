#!/usr/bin/env bash
# Starts the local PostgreSQL and Redis the tests use when they are installed but
# not running. Where a server is not installed at all the tests fall back to
# SQLite / the embedded broker (and fail instead when CI is set).
set -u
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! port_open 5432 && command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
if ! port_open 6379 && command -v redis-server >/dev/null 2>&1; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
for i in $(seq 1 20); do
  port_open 5432 && port_open 6379 && break
  sleep 0.5
done
port_open 5432 && echo "PostgreSQL: up" || echo "PostgreSQL: absent"
port_open 6379 && echo "Redis: up" || echo "Redis: absent"
exit 0
