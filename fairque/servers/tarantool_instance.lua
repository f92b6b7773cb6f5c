-- A Tarantool instance for fairque's storage: `tarantool tarantool_instance.lua`.
-- Settings from the environment:
--   FAIRQUE_TARANTOOL_LISTEN   host:port to listen on (default 127.0.0.1:3301)
--   FAIRQUE_TARANTOOL_DIR      data folder: snapshots and the write-ahead log (default .)
--   FAIRQUE_TARANTOOL_USER     a user for clients, with FAIRQUE_TARANTOOL_PASSWORD; without
--                              one, the guest user (no password) gets every right, which
--                              only suits a server that listens on loopback
-- The WAL is on ('write': each acknowledged call is in the log before the reply, so a
-- killed process loses nothing the OS has; set wal_mode = 'fsync' against power loss).
-- Tuples may hold a 16 MiB payload (fairque's limit), above Tarantool's 1 MiB default.

local listen = os.getenv('FAIRQUE_TARANTOOL_LISTEN') or '127.0.0.1:3301'
local user = os.getenv('FAIRQUE_TARANTOOL_USER')

-- Listen only once the users are set up: a client that connects sooner would be refused.
box.cfg{
  work_dir = os.getenv('FAIRQUE_TARANTOOL_DIR') or '.',
  wal_mode = 'write',
  memtx_max_tuple_size = 17 * 1024 * 1024,
  log = 'tarantool.log',
  log_level = 5,
}

if user ~= nil then
  local password = os.getenv('FAIRQUE_TARANTOOL_PASSWORD') or error('set FAIRQUE_TARANTOOL_PASSWORD')
  box.schema.user.create(user, {password = password, if_not_exists = true})
  box.schema.user.passwd(user, password)
  -- The first client installs the spaces and the stored function, so it needs DDL rights.
  box.schema.user.grant(user, 'super', nil, nil, {if_not_exists = true})
else
  box.schema.user.grant('guest', 'super', nil, nil, {if_not_exists = true})
end

box.cfg{listen = listen}
