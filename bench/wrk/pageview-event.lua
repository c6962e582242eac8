-- The page view the wrk scripts send (loaded with require "pageview-event"): pageview.lua sends one a
-- request to /campaigns/query, batch.lua sends them in batches to /events/batch, so both measure the
-- same events. fields(r, id): the event's JSON fields after the opening brace (visitorId, platform,
-- device, event, path, referrer), the device, path and referrer picked by the random number r.

local DEVICES = { "desktop", "mobile", "tablet" }
local REFERRERS = { "null", '"https://www.google.com/"', '"https://news.example.org/article/42"', "null" }

local M = {}

function M.fields (r, id)
  return '"visitorId":"' .. id ..
    '","platform":"web","device":"' .. DEVICES[r % 3 + 1] ..
    '","event":"pageView","path":"/products/' .. (r % 997) ..
    '","referrer":' .. REFERRERS[r % 4 + 1] .. '}'
end

return M
