-- The shared part of the orders workload: its options, its connection, the data set
-- (prepare, cleanup) and its own consistency check (sysbench orders.lua check).
-- dbrig copies this folder into the run and puts the copy on LUA_PATH, so
-- orders.lua's require("orders_common") finds this file wherever dbrig runs it.

ffi = require("ffi")
ffi.cdef[[
void sb_counter_inc(int, sb_counter_type);
]]

sysbench.cmdline.options = {
  rows = {"rows in the orders table", 1000},
  rollback_pct = {"percent of events rolled back on purpose (counted as errors)", 1},
}

function connect()
  local drv = sysbench.sql.driver()
  return drv, drv:connect()
end

-- sysbench's built-in prepare: one table, every row consistent (total = qty * 10).
function prepare()
  local _, con = connect()
  con:query([[
    CREATE TABLE IF NOT EXISTS orders (
      id INT NOT NULL PRIMARY KEY,
      qty INT NOT NULL,
      total INT NOT NULL
    ) ENGINE = InnoDB]])
  local batch = {}
  for id = 1, sysbench.opt.rows do
    batch[#batch + 1] = string.format("(%d, 1, 10)", id)
    if #batch == 500 or id == sysbench.opt.rows then
      con:query("INSERT INTO orders (id, qty, total) VALUES " .. table.concat(batch, ","))
      batch = {}
    end
  end
  print(string.format("orders: %d rows", sysbench.opt.rows))
end

function cleanup()
  local _, con = connect()
  con:query("DROP TABLE IF EXISTS orders")
end

-- A custom command: fails (a Lua error, exit code 1) when a row breaks the invariant.
function cmd_check()
  local _, con = connect()
  local rs = con:query("SELECT COUNT(*) FROM orders WHERE total <> qty * 10")
  local bad = tonumber(rs:fetch_row()[1])
  if bad ~= 0 then
    error(string.format("orders: %d rows with total <> qty * 10", bad))
  end
  print("orders: check passed")
end

sysbench.cmdline.commands = {
  check = {cmd_check},
}
