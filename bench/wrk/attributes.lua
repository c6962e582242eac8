-- POST /visitors/attributes: each request picks a visitor at random from the pool of BENCH_VISITORS
-- ids and writes four attributes (string, number, boolean, list) whose values change from request
-- to request, so every write really changes the stored row.
--
-- Environment: BENCH_ACCOUNT (account UUID, required), BENCH_TOKEN (a read-write token, required),
-- BENCH_VISITORS, BENCH_SEED, BENCH_CHECK, BENCH_WRK_DIR (where common.lua is; default bench/wrk).
--
--   BENCH_ACCOUNT=<uuid> BENCH_TOKEN=<token> wrk -t1 -c64 -d10s -s bench/wrk/attributes.lua \
--     http://127.0.0.1:8080/visitors/attributes

package.path = (os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/?.lua;" .. package.path
local common = require "common"

local ids, n_ids, account = common.json_post()
local token = common.require_env("BENCH_TOKEN")
local PLANS = { "free", "starter", "pro", "enterprise", "trial" }
local INTERESTS = { '["shoes"]', '["shoes","bags"]', '["outdoor","camping","tents"]', '[]', '["books"]', '["garden","tools"]' }
local PREFIX = '{"account":"' .. account .. '","token":' .. common.quote(token) .. ',"visitorId":"'
local sequence = 0

function request ()
  local r = common.random()
  sequence = sequence + 1
  local body = PREFIX .. ids[r % n_ids + 1] ..
    '","attributes":{"plan":"' .. PLANS[r % 5 + 1] ..
    '","visits":' .. sequence ..
    ',"newsletter":' .. (r % 2 == 0 and "true" or "false") ..
    ',"interests":' .. INTERESTS[r % 6 + 1] .. '}}'
  return common.format(body)
end
