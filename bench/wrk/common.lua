-- Shared by the wrk scripts of `npm run bench:http` (loaded with require "common"; the scripts add
-- $BENCH_WRK_DIR, default bench/wrk, to package.path).
--
-- * ids(): a pool of BENCH_VISITORS (default 10,000) distinct UUID v4 visitor ids, generated
--   deterministically from BENCH_SEED with xorshift32, so every run and every wrk thread sees the
--   same pool and the load spreads over many actors instead of one hot key; or, with BENCH_IDS_FILE,
--   the ids of that file, one a line (bench:cluster gives each node's wrk the ids that node owns).
-- * json_post(): the start every script shares (POST, JSON, the pool, BENCH_ACCOUNT), and common.random,
--   a per-thread pseudo-random sequence that picks the visitor (and values) of each request.
-- * done(): prints one line `BENCH_WRK_JSON {...}` (requests, duration, socket errors, non-2xx
--   count, latency percentiles in microseconds) for bench/http.ts to parse.
-- * BENCH_PAUSE_MS (bench:cluster's paced rows): every connection pauses this long after each answer
--   before its next request (wrk calls the global delay() this defines): a load below saturation.
-- * BENCH_CHECK=1 (warm-up runs): also looks at every response and counts those that are not 2xx,
--   keeping the first one as a sample. Off in measured runs, where it would slow wrk down; there
--   wrk's own count of status >= 400 (summary.errors.status) is used.

local bit = require "bit"
local band, bxor, lshift, rshift, tohex = bit.band, bit.bxor, bit.lshift, bit.rshift, bit.tohex

local M = {}

local function env (name, default)
  local value = os.getenv(name)
  if value == nil or value == "" then return default end
  return value
end
M.env = env

local pause_ms = tonumber(env("BENCH_PAUSE_MS", "0"))
if pause_ms > 0 then
  function delay () return pause_ms end
end

function M.require_env (name)
  local value = os.getenv(name)
  if value == nil or value == "" then error(name .. " is not set") end
  return value
end

--- A xorshift32 generator: a function returning the next non-negative 31-bit integer.
function M.rng (seed)
  local x = seed
  if x == 0 then x = 0x2545F491 end
  return function ()
    x = bxor(x, lshift(x, 13))
    x = bxor(x, rshift(x, 17))
    x = bxor(x, lshift(x, 5))
    return band(x, 0x7fffffff)
  end
end

local VARIANT = { "8", "9", "a", "b" }

--- n distinct UUID v4 strings (distinct because xorshift32 states are: the first 8 hex digits differ).
function M.uuids (n, seed)
  local x = seed
  local function nxt ()
    x = bxor(x, lshift(x, 13))
    x = bxor(x, rshift(x, 17))
    x = bxor(x, lshift(x, 5))
    return x
  end
  local ids = {}
  for i = 1, n do
    local a, b, c, d = nxt(), nxt(), nxt(), nxt()
    local h = tohex(a, 8) .. tohex(b, 8) .. tohex(c, 8) .. tohex(d, 8)
    ids[i] = h:sub(1, 8) .. "-" .. h:sub(9, 12) .. "-4" .. h:sub(14, 16) .. "-" ..
      VARIANT[band(c, 3) + 1] .. h:sub(18, 20) .. "-" .. h:sub(21, 32)
  end
  return ids
end

function M.ids ()
  local file = env("BENCH_IDS_FILE", nil)
  if file ~= nil then
    local ids = {}
    for line in io.lines(file) do ids[#ids + 1] = line end
    if #ids == 0 then error(file .. " (BENCH_IDS_FILE) holds no id") end
    return ids
  end
  return M.uuids(tonumber(env("BENCH_VISITORS", "10000")), tonumber(env("BENCH_SEED", "20240601")))
end

--- JSON string literal (for values that come from the environment).
function M.quote (s)
  return '"' .. s:gsub('[%c"\\]', function (ch)
    if ch == '"' then return '\\"' end
    if ch == '\\' then return '\\\\' end
    return string.format("\\u%04x", ch:byte())
  end) .. '"'
end

-- Thread plumbing: each thread gets an index (to start its random sequence elsewhere) and, in check
-- mode, counts responses; done() reads the counts back from the threads.

local threads = {}
local thread_count = 0

function setup (thread)
  thread_count = thread_count + 1
  thread:set("thread_index", thread_count)
  threads[thread_count] = thread
end

--- The random sequence of this thread (call from init()). BENCH_THREAD_OFFSET (default 0) shifts the
--- thread index, so that several wrk processes (one per node in bench/cluster.ts) draw different sequences
--- over the same pool of ids.
function M.thread_rng ()
  local index = (thread_index or 1) + tonumber(env("BENCH_THREAD_OFFSET", "0"))
  return M.rng(tonumber(env("BENCH_SEED", "20240601")) * 7 + index * 7919)
end

--- The start every script shares: requests are POSTs of a JSON body, and each thread's random sequence
--- (common.random, a function returning the next number) is started in init(). Returns the pool of
--- visitor ids, its size and BENCH_ACCOUNT.
function M.json_post ()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  function init (args)
    M.random = M.thread_rng()
  end
  local ids = M.ids()
  return ids, #ids, M.require_env("BENCH_ACCOUNT")
end

--- The request of a JSON body (wrk.format with the script's method, path and headers). With
--- BENCH_IDEMPOTENCY_PREFIX, each request carries its own Idempotency-Key, <prefix>-<thread>-<n>, as
--- beacon/client sends one on every write (bench:cluster's (c2k) rows: what the key costs).
local KEY_PREFIX = env("BENCH_IDEMPOTENCY_PREFIX", nil)
local keys = 0
function M.format (body)
  if KEY_PREFIX ~= nil then
    keys = keys + 1
    wrk.headers["Idempotency-Key"] = KEY_PREFIX .. "-" .. (thread_index or 1) .. "-" .. keys
  end
  return wrk.format(nil, nil, nil, body)
end

M.check = env("BENCH_CHECK", "0") == "1"

if M.check then
  responses = 0
  non2xx = 0
  sample = nil
  function response (status, headers, body)
    responses = responses + 1
    if status < 200 or status > 299 then
      non2xx = non2xx + 1
      if sample == nil then sample = tostring(status) .. " " .. tostring(body):sub(1, 300) end
    end
  end
end

function done (summary, latency, requests)
  local checked, bad, first = 0, 0, nil
  for _, thread in ipairs(threads) do
    checked = checked + (thread:get("responses") or 0)
    bad = bad + (thread:get("non2xx") or 0)
    first = first or thread:get("sample")
  end
  local e = summary.errors
  local out = {
    '{"requests":', summary.requests,
    ',"duration_us":', summary.duration,
    ',"bytes":', summary.bytes,
    ',"errors":{"connect":', e.connect, ',"read":', e.read, ',"write":', e.write,
    ',"status":', e.status, ',"timeout":', e.timeout, '}',
    ',"latency_us":{"min":', latency.min, ',"mean":', string.format("%.1f", latency.mean),
    ',"stdev":', string.format("%.1f", latency.stdev), ',"max":', latency.max,
    ',"p50":', latency:percentile(50), ',"p90":', latency:percentile(90),
    ',"p99":', latency:percentile(99), ',"p999":', latency:percentile(99.9), '}',
    ',"check":', M.check and ('{"responses":' .. checked .. ',"non2xx":' .. bad ..
      ',"sample":' .. (first and M.quote(first) or 'null') .. '}') or 'null',
    '}',
  }
  for i, v in ipairs(out) do out[i] = tostring(v) end
  io.write("BENCH_WRK_JSON ", table.concat(out), "\n")
end

return M
