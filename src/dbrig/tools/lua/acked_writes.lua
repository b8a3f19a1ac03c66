-- dbrig's acknowledged-writes workload for sysbench 1.0.20: how many commits the
-- server acknowledged and then lost.
--
-- Each event is one autocommit INSERT of a new id. When the server answers OK,
-- the commit is acknowledged: the thread appends the id to its own file
-- acked-<tid>.ids in the working directory (dbrig gives it an empty folder) and
-- flushes it to the kernel, so the file survives a crash of the server (the
-- client keeps running; a power loss is another matter, see docs/reliability.md).
-- After the run dbrig reads the files and looks every id up: acknowledged but
-- missing is a lost commit.
--
-- Ids never repeat, across threads, reconnects and server restarts: thread T
-- owns the range [T * 2^40, (T + 1) * 2^40) and counts up in Lua memory, which
-- a crash of the server does not touch. It starts above the largest id already
-- in its range (a table left by an earlier run) and writes that first id in
-- the file's header line "# thread=T first=F", so ids found in the table but
-- never acknowledged (in flight when the server died) can be counted too.
-- Never an AUTO_INCREMENT: after a crash InnoDB may hand out a lost id again,
-- and the lost commit would then look present.
--
-- Commands: prepare (creates the table), run, cleanup (drops it).

ffi = require("ffi")

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } dbrig_acked_timespec;
int clock_gettime(int clk_id, dbrig_acked_timespec *tp);
int usleep(unsigned int usec);
]]

sysbench.cmdline.options = {
   engine = { "Storage engine of the table", "innodb" },
   payload_bytes = { "Bytes of filler per row", 100 },
   reconnect_timeout = { "Seconds to keep reconnecting to a server that went away", 120 },
}

local TABLE = "acked_writes"
local SPAN = 2 ^ 40 -- ids per thread; 4095 threads stay below 2^52, exact in a Lua double

local function connect()
   local drv = sysbench.sql.driver()
   return drv:connect()
end

function cmd_prepare()
   local con = connect()
   con:query(string.format([[CREATE TABLE IF NOT EXISTS %s (
      id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
      thread INT NOT NULL,
      payload VARCHAR(4096) NOT NULL) ENGINE=%s]], TABLE, sysbench.opt.engine))
   con:disconnect()
end

function cmd_cleanup()
   local con = connect()
   con:query("DROP TABLE IF EXISTS " .. TABLE)
   con:disconnect()
end

sysbench.cmdline.commands = {
   prepare = { cmd_prepare },
   cleanup = { cmd_cleanup },
}

local CLOCK_MONOTONIC = 1
local ts = ffi.new("dbrig_acked_timespec")

local function now_s()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) / 1e9
end

local con
local next_id
local ack_file
local payload

local function first_free_id(tid)
   local low = tid * SPAN
   local high = low + SPAN - 1
   local largest = con:query_row(string.format(
      "SELECT MAX(id) FROM %s WHERE id BETWEEN %.0f AND %.0f", TABLE, low, high))
   if largest == nil then
      return low + 1
   end
   return tonumber(largest) + 1
end

function thread_init()
   con = connect()
   local tid = sysbench.tid
   next_id = first_free_id(tid)
   payload = string.rep("x", sysbench.opt.payload_bytes)
   local name = string.format("acked-%d.ids", tid)
   ack_file = assert(io.open(name, "a"))
   ack_file:write(string.format("# thread=%d first=%.0f\n", tid, next_id))
   ack_file:flush()
end

-- A new connection once the server is back (it went away: killed, restarting).
-- Not sysbench's own reconnect (--mysql-ignore-errors=2013): with the MariaDB
-- client library sysbench 1.0.20 reuses the closed handle and crashes
-- (akopytov/sysbench#527; a SIGSEGV here too). A new handle is safe.
local function reconnect()
   pcall(con.disconnect, con)
   local give_up = now_s() + sysbench.opt.reconnect_timeout
   while true do
      local ok, fresh = pcall(connect)
      if ok then
         con = fresh
         return
      end
      if now_s() > give_up then
         error(string.format("acked_writes: no server for %d s, giving up",
            sysbench.opt.reconnect_timeout), 0)
      end
      ffi.C.usleep(100000)
   end
end

-- Errors that mean the server went away: can't connect (2002, 2003), gone away
-- (2006), lost during the query (2013), shutting down (1053), connection killed
-- (1927). Any other error is a real one and ends the run.
local GONE = { [2002] = true, [2003] = true, [2006] = true, [2013] = true,
   [1053] = true, [1927] = true }

local function server_went_away(err)
   local errno = tonumber(tostring(err):match("errno = (%d+)"))
   return errno ~= nil and GONE[errno] == true
end

-- One commit. If the server goes away, that id stays unacknowledged: it may or
-- may not have committed, so it is never reused; the thread reconnects and the
-- next event takes a new id.
function event()
   local id = next_id
   next_id = next_id + 1
   local ok, err = pcall(con.query, con, string.format(
      "INSERT INTO %s (id, thread, payload) VALUES (%.0f, %d, '%s')",
      TABLE, id, sysbench.tid, payload))
   if not ok then
      if not server_went_away(err) then
         error(err, 0)
      end
      reconnect()
      return
   end
   ack_file:write(string.format("%.0f\n", id))
   ack_file:flush()
end

function thread_done()
   ack_file:close()
   con:disconnect()
end
