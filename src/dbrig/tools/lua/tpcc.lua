-- dbrig's TPC-C-like workload for sysbench 1.0.20.
--
-- Written for dbrig from the public TPC-C specification, revision 5.11:
-- clause 1 (the nine tables), clause 2 (the five transactions), clause 3.3.2
-- (consistency, checked by dbrig itself after a run) and clause 4.3 (the
-- initial data). TPC-C-like, not an audited TPC-C implementation: no keying or
-- think time (a closed loop), no terminal emulation, no response-time limits.
--
-- Commands:  prepare (parallel: warehouse w is loaded by thread (w-1) % threads,
--            the item table by the last thread, which has the fewest), run, cleanup.
-- Report:    at the end of `run` every worker thread prints one line per
--            transaction type (see thread_done), which dbrig adds up.

ffi = require("ffi")

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } dbrig_tpcc_timespec;
int clock_gettime(int clk_id, dbrig_tpcc_timespec *tp);
]]

sysbench.cmdline.options = {
   warehouses = { "Number of warehouses", 1 },
   engine = { "Storage engine of the tables", "innodb" },
   foreign_keys = { "Declare the spec's foreign keys", false },
   measure_after = { "Seconds of warm-up not counted in the per-type report", 0 },
}

-- Clause 4.3.2.3: the syllables of C_LAST.
local SYLLABLES = { "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING" }

-- Clause 2.1.6: the run-time constants C of NURand. C_LAST_RUN differs from
-- C_LAST_LOAD by 86, inside clause 2.1.6.1's range [65..119] and not 96 or 112.
local C_LAST_LOAD = 157
local C_LAST_RUN = 243
local C_ID = 259
local C_OL_I_ID = 7911

local ITEMS = 100000
local DISTRICTS = 10
local CUSTOMERS = 3000
local ORDERS = 3000
local FIRST_UNDELIVERED = 2101 -- clause 4.3.3.1: orders 2101..3000 are new
local UNUSED_ITEM = ITEMS + 1

local TYPES = { "new_order", "payment", "order_status", "delivery", "stock_level" }

local CLOCK_MONOTONIC = 1
local ts = ffi.new("dbrig_tpcc_timespec")

local function now_us()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

local function rand(a, b)
   return sysbench.rand.uniform(a, b)
end

-- Clause 2.1.6: NURand(A, x, y).
local function nurand(a, c, x, y)
   return (bit.bor(rand(0, a), rand(x, y)) + c) % (y - x + 1) + x
end

-- Clause 4.3.2.3: the last name of number n in [0..999].
local function last_name(n)
   return SYLLABLES[math.floor(n / 100) + 1]
      .. SYLLABLES[math.floor(n / 10) % 10 + 1]
      .. SYLLABLES[n % 10 + 1]
end

-- Random strings (clause 4.3.2.2) cut from a per-thread pool of random
-- characters: cheap enough to load 100,000 stock rows per warehouse quickly.
local ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
local POOL_SIZE = 8192
local pool

local function make_pool()
   local chars = {}
   for i = 1, POOL_SIZE + 600 do
      local k = rand(1, #ALNUM)
      chars[i] = ALNUM:sub(k, k)
   end
   pool = table.concat(chars)
end

local function astring(min, max)
   local len = rand(min, max)
   local from = rand(1, POOL_SIZE)
   return pool:sub(from, from + len - 1)
end

local function nstring(min, max)
   local len = rand(min, max)
   local digits = {}
   for i = 1, len do
      digits[i] = rand(0, 9)
   end
   return table.concat(digits)
end

-- Clause 4.3.3.1: in 10 % of the rows "ORIGINAL" is put at a random place.
local function data_string(min, max)
   local s = astring(min, max)
   if rand(1, 10) == 1 then
      local at = rand(1, #s - 7)
      s = s:sub(1, at - 1) .. "ORIGINAL" .. s:sub(at + 8)
   end
   return s
end

local function zip()
   return nstring(4, 4) .. "11111"
end

local function address()
   return string.format("'%s','%s','%s','%s','%s'",
      astring(10, 20), astring(10, 20), astring(10, 20), astring(2, 2), zip())
end

local function money(min_cents, max_cents)
   return string.format("%.2f", rand(min_cents, max_cents) / 100)
end

local function fraction(max_ten_thousandths)
   return string.format("%.4f", rand(0, max_ten_thousandths) / 10000)
end

-- Clause 1.3: the nine tables with their primary keys, the customer-name index
-- Payment and Order-Status use by last name, and the orders-by-customer index
-- Order-Status uses to find a customer's latest order.
local function create_tables(con)
   local engine = sysbench.opt.engine
   local fk = sysbench.opt.foreign_keys
   local function ddl(name, body, keys)
      local sql = "CREATE TABLE IF NOT EXISTS " .. name .. " (" .. body
      if fk and keys then
         sql = sql .. ", " .. keys
      end
      con:query(sql .. ") ENGINE=" .. engine)
   end
   ddl("warehouse", [[w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20),
      w_street_2 VARCHAR(20), w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9),
      w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2), PRIMARY KEY (w_id)]])
   ddl("district", [[d_id TINYINT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10),
      d_street_1 VARCHAR(20), d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2),
      d_zip CHAR(9), d_tax DECIMAL(4,4), d_ytd DECIMAL(12,2), d_next_o_id INT,
      PRIMARY KEY (d_w_id, d_id)]],
      "FOREIGN KEY (d_w_id) REFERENCES warehouse (w_id)")
   ddl("customer", [[c_id INT NOT NULL, c_d_id TINYINT NOT NULL, c_w_id INT NOT NULL,
      c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20),
      c_street_2 VARCHAR(20), c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9),
      c_phone CHAR(16), c_since DATETIME, c_credit CHAR(2), c_credit_lim DECIMAL(12,2),
      c_discount DECIMAL(4,4), c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2),
      c_payment_cnt SMALLINT, c_delivery_cnt SMALLINT, c_data VARCHAR(500),
      PRIMARY KEY (c_w_id, c_d_id, c_id), KEY idx_customer_name (c_w_id, c_d_id, c_last, c_first)]],
      "FOREIGN KEY (c_w_id, c_d_id) REFERENCES district (d_w_id, d_id)")
   ddl("history", [[h_c_id INT, h_c_d_id TINYINT, h_c_w_id INT, h_d_id TINYINT, h_w_id INT,
      h_date DATETIME, h_amount DECIMAL(6,2), h_data VARCHAR(24)]],
      "FOREIGN KEY (h_c_w_id, h_c_d_id, h_c_id) REFERENCES customer (c_w_id, c_d_id, c_id), " ..
      "FOREIGN KEY (h_w_id, h_d_id) REFERENCES district (d_w_id, d_id)")
   ddl("orders", [[o_id INT NOT NULL, o_d_id TINYINT NOT NULL, o_w_id INT NOT NULL,
      o_c_id INT, o_entry_d DATETIME, o_carrier_id TINYINT, o_ol_cnt TINYINT,
      o_all_local TINYINT, PRIMARY KEY (o_w_id, o_d_id, o_id),
      KEY idx_orders_customer (o_w_id, o_d_id, o_c_id, o_id)]],
      "FOREIGN KEY (o_w_id, o_d_id, o_c_id) REFERENCES customer (c_w_id, c_d_id, c_id)")
   ddl("new_order", [[no_o_id INT NOT NULL, no_d_id TINYINT NOT NULL, no_w_id INT NOT NULL,
      PRIMARY KEY (no_w_id, no_d_id, no_o_id)]],
      "FOREIGN KEY (no_w_id, no_d_id, no_o_id) REFERENCES orders (o_w_id, o_d_id, o_id)")
   ddl("item", [[i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2),
      i_data VARCHAR(50), PRIMARY KEY (i_id)]])
   ddl("stock", [[s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity SMALLINT,
      s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24),
      s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24),
      s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INT, s_order_cnt SMALLINT,
      s_remote_cnt SMALLINT, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id)]],
      "FOREIGN KEY (s_w_id) REFERENCES warehouse (w_id), " ..
      "FOREIGN KEY (s_i_id) REFERENCES item (i_id)")
   ddl("order_line", [[ol_o_id INT NOT NULL, ol_d_id TINYINT NOT NULL, ol_w_id INT NOT NULL,
      ol_number TINYINT NOT NULL, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d DATETIME,
      ol_quantity TINYINT, ol_amount DECIMAL(6,2), ol_dist_info CHAR(24),
      PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)]],
      "FOREIGN KEY (ol_w_id, ol_d_id, ol_o_id) REFERENCES orders (o_w_id, o_d_id, o_id), " ..
      "FOREIGN KEY (ol_supply_w_id, ol_i_id) REFERENCES stock (s_w_id, s_i_id)")
end

local TABLES = { "order_line", "new_order", "orders", "history", "customer", "stock",
   "district", "warehouse", "item" }

-- ---------------------------------------------------------------- the load (clause 4.3)

local function bulk(con, sql, rows)
   con:bulk_insert_init(sql)
   rows(function(values) con:bulk_insert_next("(" .. values .. ")") end)
   con:bulk_insert_done()
end

local function load_items(con)
   bulk(con, "INSERT INTO item VALUES", function(add)
      for i = 1, ITEMS do
         add(string.format("%d,%d,'%s',%s,'%s'", i, rand(1, 10000), astring(14, 24),
            money(100, 10000), data_string(26, 50)))
      end
   end)
end

local function load_warehouse_row(con, w)
   con:query(string.format("INSERT INTO warehouse VALUES (%d,'%s',%s,%s,300000.00)",
      w, astring(6, 10), address(), fraction(2000)))
end

local function load_stock(con, w)
   bulk(con, "INSERT INTO stock VALUES", function(add)
      for i = 1, ITEMS do
         local dists = {}
         for d = 1, DISTRICTS do
            dists[d] = "'" .. astring(24, 24) .. "'"
         end
         add(string.format("%d,%d,%d,%s,0,0,0,'%s'", i, w, rand(10, 100),
            table.concat(dists, ","), data_string(26, 50)))
      end
   end)
end

local function load_district_row(con, w, d)
   con:query(string.format("INSERT INTO district VALUES (%d,%d,'%s',%s,%s,30000.00,%d)",
      d, w, astring(6, 10), address(), fraction(2000), ORDERS + 1))
end

local function customer_last(c)
   if c <= 1000 then
      return last_name(c - 1)
   end
   return last_name(nurand(255, C_LAST_LOAD, 0, 999))
end

local function load_customers(con, w, d)
   bulk(con, "INSERT INTO customer VALUES", function(add)
      for c = 1, CUSTOMERS do
         add(string.format(
            "%d,%d,%d,'%s','OE','%s',%s,'%s',NOW(),'%s',50000.00,%s,-10.00,10.00,1,0,'%s'",
            c, d, w, astring(8, 16), customer_last(c), address(), nstring(16, 16),
            rand(1, 10) == 1 and "BC" or "GC", fraction(5000), astring(300, 500)))
      end
   end)
   bulk(con, "INSERT INTO history VALUES", function(add)
      for c = 1, CUSTOMERS do
         add(string.format("%d,%d,%d,%d,%d,NOW(),10.00,'%s'", c, d, w, d, w, astring(12, 24)))
      end
   end)
end

-- A random permutation of 1..n (Fisher-Yates): O_C_ID of the initial orders.
local function permutation(n)
   local p = {}
   for i = 1, n do
      p[i] = i
   end
   for i = n, 2, -1 do
      local j = rand(1, i)
      p[i], p[j] = p[j], p[i]
   end
   return p
end

local function load_orders(con, w, d)
   local customers = permutation(CUSTOMERS)
   local line_counts = {}
   bulk(con, "INSERT INTO orders VALUES", function(add)
      for o = 1, ORDERS do
         line_counts[o] = rand(5, 15)
         local carrier = o < FIRST_UNDELIVERED and tostring(rand(1, 10)) or "NULL"
         add(string.format("%d,%d,%d,%d,NOW(),%s,%d,1", o, d, w, customers[o], carrier,
            line_counts[o]))
      end
   end)
   bulk(con, "INSERT INTO order_line VALUES", function(add)
      for o = 1, ORDERS do
         local delivered = o < FIRST_UNDELIVERED
         for n = 1, line_counts[o] do
            add(string.format("%d,%d,%d,%d,%d,%d,%s,5,%s,'%s'", o, d, w, n, rand(1, ITEMS), w,
               delivered and "NOW()" or "NULL",
               delivered and "0.00" or money(1, 999999), astring(24, 24)))
         end
      end
   end)
   bulk(con, "INSERT INTO new_order VALUES", function(add)
      for o = FIRST_UNDELIVERED, ORDERS do
         add(string.format("%d,%d,%d", o, d, w))
      end
   end)
end

local function load_warehouse(con, w)
   con:query("BEGIN")
   load_warehouse_row(con, w)
   load_stock(con, w)
   for d = 1, DISTRICTS do
      load_district_row(con, w, d)
      load_customers(con, w, d)
      load_orders(con, w, d)
   end
   con:query("COMMIT")
end

local function connect()
   local drv = sysbench.sql.driver()
   return drv:connect()
end

function cmd_prepare()
   make_pool()
   local con = connect()
   con:query("SET SESSION foreign_key_checks = 0")
   con:query("SET SESSION unique_checks = 0")
   create_tables(con)
   local threads = sysbench.opt.threads
   if sysbench.tid == threads - 1 then
      con:query("BEGIN")
      load_items(con)
      con:query("COMMIT")
   end
   for w = sysbench.tid + 1, sysbench.opt.warehouses, threads do
      load_warehouse(con, w)
      print(string.format("tpcc: warehouse %d loaded", w))
   end
   con:disconnect()
end

function cmd_cleanup()
   local con = connect()
   con:query("SET SESSION foreign_key_checks = 0")
   for _, name in ipairs(TABLES) do
      con:query("DROP TABLE IF EXISTS " .. name)
   end
   con:disconnect()
end

sysbench.cmdline.commands = {
   prepare = { cmd_prepare, sysbench.cmdline.PARALLEL_COMMAND },
   cleanup = { cmd_cleanup },
}

-- --------------------------------------------------------- the transactions (clause 2)

local con
local home_w
local stock_level_d
local measure_from_us
local stats = {}

-- Latency histogram: bucket b holds latencies below 2^(b/4) µs (about 19 % wide).
local function bucket(us)
   if us < 1 then
      return 0
   end
   return math.floor(math.log(us) / math.log(2) * 4) + 1
end

local function other_warehouse()
   local w = rand(1, sysbench.opt.warehouses - 1)
   if w >= home_w then
      w = w + 1
   end
   return w
end

local function one_row(sql)
   local rs = con:query(sql)
   if rs == nil or rs.nrows == 0 then
      return nil
   end
   return rs:fetch_row()
end

local function query(fmt, ...)
   return con:query(string.format(fmt, ...))
end

local Rollback = {} -- raised by New-Order on its unused item (clause 2.4.2.3)

-- Clause 2.4: New-Order. Returns "rollback" for the 1 % that hit an unused item.
local function new_order()
   local w = home_w
   local d = rand(1, DISTRICTS)
   local c = nurand(1023, C_ID, 1, CUSTOMERS)
   local ol_cnt = rand(5, 15)
   local rollback = rand(1, 100) == 1
   local lines = {}
   local all_local = 1
   for n = 1, ol_cnt do
      local supply = w
      if sysbench.opt.warehouses > 1 and rand(1, 100) == 1 then
         supply = other_warehouse()
         all_local = 0
      end
      local item = nurand(8191, C_OL_I_ID, 1, ITEMS)
      if rollback and n == ol_cnt then
         item = UNUSED_ITEM
      end
      lines[n] = { item = item, supply = supply, quantity = rand(1, 10) }
   end
   con:query("BEGIN")
   one_row(string.format("SELECT w_tax FROM warehouse WHERE w_id = %d", w))
   local district = one_row(string.format(
      "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = %d AND d_id = %d FOR UPDATE", w, d))
   local o_id = tonumber(district[2])
   query("UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = %d AND d_id = %d",
      w, d)
   one_row(string.format("SELECT c_discount, c_last, c_credit FROM customer " ..
      "WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d", w, d, c))
   query("INSERT INTO orders VALUES (%d,%d,%d,%d,NOW(),NULL,%d,%d)", o_id, d, w, c, ol_cnt,
      all_local)
   query("INSERT INTO new_order VALUES (%d,%d,%d)", o_id, d, w)
   for n, line in ipairs(lines) do
      local item = one_row(string.format(
         "SELECT i_price, i_name, i_data FROM item WHERE i_id = %d", line.item))
      if item == nil then
         con:query("ROLLBACK")
         return "rollback"
      end
      local stock = one_row(string.format(
         "SELECT s_quantity, s_dist_%02d, s_data FROM stock WHERE s_w_id = %d AND s_i_id = %d " ..
         "FOR UPDATE", d, line.supply, line.item))
      local quantity = tonumber(stock[1])
      if quantity >= line.quantity + 10 then
         quantity = quantity - line.quantity
      else
         quantity = quantity - line.quantity + 91
      end
      query("UPDATE stock SET s_quantity = %d, s_ytd = s_ytd + %d, s_order_cnt = s_order_cnt + 1, " ..
         "s_remote_cnt = s_remote_cnt + %d WHERE s_w_id = %d AND s_i_id = %d",
         quantity, line.quantity, line.supply == w and 0 or 1, line.supply, line.item)
      query("INSERT INTO order_line VALUES (%d,%d,%d,%d,%d,%d,NULL,%d,%.2f,'%s')",
         o_id, d, w, n, line.item, line.supply, line.quantity,
         line.quantity * tonumber(item[1]), stock[2])
   end
   con:query("COMMIT")
end

-- Clause 2.5.2.2 / 2.6.2.2: the customer by last name is the one at position
-- ceil(n / 2) of those with that name, sorted by C_FIRST.
local function customer_by_name(w, d, columns)
   local rs = query("SELECT %s FROM customer WHERE c_w_id = %d AND c_d_id = %d AND c_last = '%s' " ..
      "ORDER BY c_first", columns, w, d, last_name(nurand(255, C_LAST_RUN, 0, 999)))
   local middle = math.floor((rs.nrows + 1) / 2)
   local row
   for _ = 1, middle do
      row = rs:fetch_row()
   end
   return row
end

local function customer_by_id(w, d, columns)
   return one_row(string.format("SELECT %s FROM customer WHERE c_w_id = %d AND c_d_id = %d " ..
      "AND c_id = %d", columns, w, d, nurand(1023, C_ID, 1, CUSTOMERS)))
end

local function pick_customer(w, d, columns)
   if rand(1, 100) <= 60 then
      return customer_by_name(w, d, columns)
   end
   return customer_by_id(w, d, columns)
end

-- Clause 2.5: Payment.
local function payment()
   local w = home_w
   local d = rand(1, DISTRICTS)
   local c_w, c_d = w, d
   if sysbench.opt.warehouses > 1 and rand(1, 100) <= 15 then
      c_w, c_d = other_warehouse(), rand(1, DISTRICTS)
   end
   local amount = money(100, 500000)
   con:query("BEGIN")
   query("UPDATE warehouse SET w_ytd = w_ytd + %s WHERE w_id = %d", amount, w)
   local wh = one_row(string.format("SELECT w_name, w_street_1, w_street_2, w_city, w_state, " ..
      "w_zip FROM warehouse WHERE w_id = %d", w))
   query("UPDATE district SET d_ytd = d_ytd + %s WHERE d_w_id = %d AND d_id = %d", amount, w, d)
   local di = one_row(string.format("SELECT d_name, d_street_1, d_street_2, d_city, d_state, " ..
      "d_zip FROM district WHERE d_w_id = %d AND d_id = %d", w, d))
   local cu = pick_customer(c_w, c_d, "c_id, c_credit")
   local c = tonumber(cu[1])
   if cu[2] == "BC" then
      local note = string.format("%d %d %d %d %d %s ", c, c_d, c_w, d, w, amount)
      query("UPDATE customer SET c_balance = c_balance - %s, c_ytd_payment = c_ytd_payment + %s, " ..
         "c_payment_cnt = c_payment_cnt + 1, c_data = LEFT(CONCAT('%s', c_data), 500) " ..
         "WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d", amount, amount, note, c_w, c_d, c)
   else
      query("UPDATE customer SET c_balance = c_balance - %s, c_ytd_payment = c_ytd_payment + %s, " ..
         "c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d",
         amount, amount, c_w, c_d, c)
   end
   query("INSERT INTO history VALUES (%d,%d,%d,%d,%d,NOW(),%s,'%s')", c, c_d, c_w, d, w, amount,
      (wh[1] .. "    " .. di[1]):sub(1, 24))
   con:query("COMMIT")
end

-- Clause 2.6: Order-Status (read-only).
local function order_status()
   local w = home_w
   local d = rand(1, DISTRICTS)
   con:query("BEGIN")
   local cu = pick_customer(w, d, "c_id, c_balance, c_first, c_middle, c_last")
   local order = one_row(string.format("SELECT o_id, o_entry_d, o_carrier_id FROM orders " ..
      "WHERE o_w_id = %d AND o_d_id = %d AND o_c_id = %d ORDER BY o_id DESC LIMIT 1",
      w, d, tonumber(cu[1])))
   if order ~= nil then
      query("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d " ..
         "FROM order_line WHERE ol_w_id = %d AND ol_d_id = %d AND ol_o_id = %d", w, d,
         tonumber(order[1]))
   end
   con:query("COMMIT")
end

-- Clause 2.7: Delivery, all ten districts in one database transaction.
local function delivery()
   local w = home_w
   local carrier = rand(1, 10)
   con:query("BEGIN")
   for d = 1, DISTRICTS do
      local oldest = one_row(string.format("SELECT no_o_id FROM new_order WHERE no_w_id = %d " ..
         "AND no_d_id = %d ORDER BY no_o_id LIMIT 1 FOR UPDATE", w, d))
      if oldest ~= nil then
         local o = tonumber(oldest[1])
         query("DELETE FROM new_order WHERE no_w_id = %d AND no_d_id = %d AND no_o_id = %d",
            w, d, o)
         local order = one_row(string.format("SELECT o_c_id FROM orders WHERE o_w_id = %d " ..
            "AND o_d_id = %d AND o_id = %d", w, d, o))
         query("UPDATE orders SET o_carrier_id = %d WHERE o_w_id = %d AND o_d_id = %d " ..
            "AND o_id = %d", carrier, w, d, o)
         query("UPDATE order_line SET ol_delivery_d = NOW() WHERE ol_w_id = %d AND ol_d_id = %d " ..
            "AND ol_o_id = %d", w, d, o)
         local total = one_row(string.format("SELECT SUM(ol_amount) FROM order_line " ..
            "WHERE ol_w_id = %d AND ol_d_id = %d AND ol_o_id = %d", w, d, o))
         query("UPDATE customer SET c_balance = c_balance + %s, c_delivery_cnt = c_delivery_cnt + 1 " ..
            "WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d", total[1] or "0", w, d,
            tonumber(order[1]))
      end
   end
   con:query("COMMIT")
end

-- Clause 2.8: Stock-Level, for the terminal's own district.
local function stock_level()
   local w, d = home_w, stock_level_d
   local threshold = rand(10, 20)
   con:query("BEGIN")
   local district = one_row(string.format(
      "SELECT d_next_o_id FROM district WHERE d_w_id = %d AND d_id = %d", w, d))
   local next_o = tonumber(district[1])
   query("SELECT COUNT(DISTINCT s_i_id) FROM order_line JOIN stock ON s_w_id = ol_w_id " ..
      "AND s_i_id = ol_i_id WHERE ol_w_id = %d AND ol_d_id = %d AND ol_o_id < %d " ..
      "AND ol_o_id >= %d AND s_quantity < %d", w, d, next_o, next_o - 20, threshold)
   con:query("COMMIT")
end

local RUN = {
   new_order = new_order,
   payment = payment,
   order_status = order_status,
   delivery = delivery,
   stock_level = stock_level,
}

-- Clause 5.2.3's mix: 45 % New-Order, 43 % Payment, 4 % each of the other three.
local function pick_type()
   local x = rand(1, 100)
   if x <= 45 then
      return "new_order"
   elseif x <= 88 then
      return "payment"
   elseif x <= 92 then
      return "order_status"
   elseif x <= 96 then
      return "delivery"
   end
   return "stock_level"
end

local function is_retryable(err)
   return type(err) == "table" and err.errcode == sysbench.error.RESTART_EVENT
end

function thread_init()
   con = connect()
   home_w = sysbench.tid % sysbench.opt.warehouses + 1
   stock_level_d = math.floor(sysbench.tid / sysbench.opt.warehouses) % DISTRICTS + 1
   measure_from_us = now_us() + sysbench.opt.measure_after * 1000000
   for _, name in ipairs(TYPES) do
      stats[name] = { count = 0, rollbacks = 0, retries = 0, lat_us = 0, buckets = {} }
   end
end

-- One transaction, retried after a deadlock or lock wait timeout until it commits.
function event()
   local name = pick_type()
   local started = now_us()
   local retries = 0
   local ok, result
   while true do
      ok, result = pcall(RUN[name])
      if ok then
         break
      end
      if not is_retryable(result) then
         error(result, 0)
      end
      pcall(con.query, con, "ROLLBACK")
      retries = retries + 1
   end
   if started < measure_from_us then
      return
   end
   local s = stats[name]
   local us = now_us() - started
   s.count = s.count + 1
   s.retries = s.retries + retries
   s.lat_us = s.lat_us + us
   if result == "rollback" then
      s.rollbacks = s.rollbacks + 1
   end
   local b = bucket(us)
   s.buckets[b] = (s.buckets[b] or 0) + 1
end

-- One line per transaction type: "tpcc: thread=T type=X count=N rollbacks=R
-- retries=E latency_us_sum=S buckets=b:n,b:n" (bucket b: below 2^(b/4) µs).
function thread_done()
   for _, name in ipairs(TYPES) do
      local s = stats[name]
      local parts = {}
      for b, n in pairs(s.buckets) do
         parts[#parts + 1] = b .. ":" .. n
      end
      io.stdout:write(string.format(
         "tpcc: thread=%d type=%s count=%d rollbacks=%d retries=%d latency_us_sum=%.0f buckets=%s\n",
         sysbench.tid, name, s.count, s.rollbacks, s.retries, s.lat_us, table.concat(parts, ",")))
   end
   io.stdout:flush()
   con:disconnect()
end
