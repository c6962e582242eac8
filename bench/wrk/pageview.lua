-- POST /campaigns/query with a pageView event (also sent to the bare baseline server, which parses
-- the same bodies). Each request picks a visitor at random from the pool of BENCH_VISITORS ids and
-- a page path and device that vary from request to request.
--
-- Environment: BENCH_ACCOUNT (account UUID, required), BENCH_VISITORS, BENCH_SEED, BENCH_CHECK,
-- BENCH_WRK_DIR (where common.lua is; default bench/wrk).
--
--   BENCH_ACCOUNT=<uuid> wrk -t1 -c64 -d10s -s bench/wrk/pageview.lua http://127.0.0.1:8080/campaigns/query

package.path = (os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/?.lua;" .. package.path
local common = require "common"
local pageview = require "pageview-event"

local ids, n_ids, account = common.json_post()
local PREFIX = '{"account":"' .. account .. '",'

function request ()
  local r = common.random()
  return common.format(PREFIX .. pageview.fields(r, ids[r % n_ids + 1]))
end
