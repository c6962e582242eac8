-- POST /events/batch with BENCH_BATCH_SIZE (default 100) pageView events, each of a visitor picked at
-- random from the pool of BENCH_VISITORS ids, built by pageview-event.lua as pageview.lua builds its:
-- the same events /campaigns/query gets one a request, in batches.
--
-- Environment: BENCH_ACCOUNT (account UUID, required), BENCH_BATCH_SIZE, BENCH_VISITORS, BENCH_SEED,
-- BENCH_CHECK (also fails the warm-up on any event refused inside a 200 answer), BENCH_WRK_DIR.
--
--   BENCH_ACCOUNT=<uuid> wrk -t1 -c64 -d10s -s bench/wrk/batch.lua http://127.0.0.1:8080/events/batch

package.path = (os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/?.lua;" .. package.path
local common = require "common"
local pageview = require "pageview-event"

local ids, n_ids, account = common.json_post()
local size = tonumber(common.env("BENCH_BATCH_SIZE", "100"))
local PREFIX = '{"account":"' .. account .. '","events":['

function request ()
  local events = {}
  for i = 1, size do
    local r = common.random()
    events[i] = "{" .. pageview.fields(r, ids[r % n_ids + 1])
  end
  return wrk.format(nil, nil, nil, PREFIX .. table.concat(events, ",") .. "]}")
end

-- A batch is answered 200 even when some of its events are refused: the warm-up counts those as failures.
if common.check then
  local counted = response
  function response (status, headers, body)
    if status == 200 and tostring(body):find('"error"', 1, true) then status = 422 end
    counted(status, headers, body)
  end
end
