#!/usr/bin/env sysbench
-- A two-file sysbench workload (dbrig's example of writing your own): each event
-- adds to one order in a transaction; rollback_pct percent of them are rolled back on
-- purpose and counted as errors, as Percona's sysbench-tpcc does with New-Order.
-- The driver, prepare, cleanup and the check live in orders_common.lua.

require("orders_common")

function thread_init()
  drv, con = connect()
end

function thread_done()
  con:disconnect()
end

function event()
  local id = sysbench.rand.uniform(1, sysbench.opt.rows)
  con:query("BEGIN")
  con:query(string.format("UPDATE orders SET qty = qty + 1, total = total + 10 WHERE id = %d", id))
  if sysbench.rand.uniform(1, 100) <= sysbench.opt.rollback_pct then
    con:query("ROLLBACK")
    ffi.C.sb_counter_inc(sysbench.tid, ffi.C.SB_CNT_ERROR) -- normal: normal_errors in the scenario
    return
  end
  con:query("COMMIT")
end
