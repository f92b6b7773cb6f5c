-- A Tarantool instance for fairque's storage: `tarantool tarantool_instance.lua`.
-- Settings from the environment:
--   FAIRQUE_TARANTOOL_LISTEN   host:port to listen on (default 127.0.0.1:3301)
--   FAIRQUE_TARANTOOL_DIR      data folder: snapshots and the write-ahead log (default .)
--   FAIRQUE_TARANTOOL_MEMORY   MiB for the data (memtx_memory; default 256): once it is
--                              full, puts are refused and takes and finishes go on
--   FAIRQUE_TARANTOOL_USER     the user clients log in as, with FAIRQUE_TARANTOOL_PASSWORD;
--                              without one clients come as guest, which only a server
--                              listening on loopback allows
-- Clients get the least they need: `execute` on the stored function, which runs with the
-- admin's rights (setuid); no one can evaluate Lua over the network. The instance itself
-- installs the spaces and the function when it starts (fairque's procedures, from the
-- package beside this file). The admin console is the Unix socket `admin.sock` in the data
-- folder (`tarantoolctl connect`, or `nc -U`): whoever may open the folder is admin.
-- The WAL is on ('write': each acknowledged call is in the log before the reply, so a
-- killed process loses nothing the OS has; set wal_mode = 'fsync' against power loss).
-- Tuples may hold a 16 MiB payload (fairque's limit), above Tarantool's 1 MiB default.

local FUNCTION = 'fairque_storage'
local listen = os.getenv('FAIRQUE_TARANTOOL_LISTEN') or '127.0.0.1:3301'
local user = os.getenv('FAIRQUE_TARANTOOL_USER')
local work_dir = os.getenv('FAIRQUE_TARANTOOL_DIR') or '.'
local memory = tonumber(os.getenv('FAIRQUE_TARANTOOL_MEMORY') or '256')

local function refuse(text)
  io.stderr:write('fairque tarantool: ' .. text .. '\n')
  os.exit(2)
end

-- 'host:port', '[v6]:port' or a Unix socket ('unix/:/path', '/path'); a bare port or a
-- host of all interfaces is not loopback.
local function on_loopback(uri)
  if uri:match('^unix/:') or uri:sub(1, 1) == '/' then return true end
  local host = uri:gsub('^.*@', ''):match('^(.*):%d+$')
  return host == 'localhost' or host == '[::1]' or (host or ''):match('^127%.') ~= nil
end

if user == nil and not on_loopback(listen) then
  refuse('listening on ' .. listen .. ' lets anyone there in as guest: set '
    .. 'FAIRQUE_TARANTOOL_USER and FAIRQUE_TARANTOOL_PASSWORD, or listen on 127.0.0.1')
end
if memory == nil or memory < 32 or memory % 1 ~= 0 then
  refuse('FAIRQUE_TARANTOOL_MEMORY must be a whole number of MiB, at least 32')
end
local password = os.getenv('FAIRQUE_TARANTOOL_PASSWORD')
if user ~= nil and (password == nil or password == '') then
  refuse('FAIRQUE_TARANTOOL_USER is set: set FAIRQUE_TARANTOOL_PASSWORD too')
end

-- Read before box.cfg moves into the data folder (this file's path may be relative).
local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local file = assert(io.open(here .. '../storage/tarantool_procedures.lua'))
local source = file:read('*a')
file:close()

-- Listen only once the function and the rights are in place: a client that connected
-- sooner would be refused.
box.cfg{
  work_dir = work_dir,
  wal_mode = 'write',
  memtx_memory = memory * 1024 * 1024,
  memtx_max_tuple_size = 17 * 1024 * 1024,
  log = 'tarantool.log',
  log_level = 5,
}

assert(loadstring(source))()('install', FUNCTION, source)
local client = user or 'guest'
if user ~= nil then
  box.schema.user.create(user, {password = password, if_not_exists = true})
  box.schema.user.passwd(user, password)
end
-- Earlier versions of this file gave clients every right ('super'): taken back.
box.schema.user.revoke(client, 'super', nil, nil, {if_exists = true})
box.schema.user.grant(client, 'execute', 'function', FUNCTION, {if_not_exists = true})

local console = require('fio').cwd() .. '/admin.sock' -- box.cfg moved into the data folder
os.remove(console) -- left by a killed server
require('console').listen('unix/:' .. console)
box.cfg{listen = listen}
