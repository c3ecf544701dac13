-- wrk script: POST /v2/feeds/<BENCH_FEED>, one batch of BENCH_ITEMS items
-- per request (bench/feeds.py). Every item is new (ids and stay dates carry
-- the thread and request numbers), so every request writes BENCH_ITEMS
-- rows. Every answer must be a 200 whose items were all created:
-- done() prints "bench-bad-status: N" (common.lua).
-- Set by bench/feeds.py:
--   BENCH_TOKEN       OAuth access token (feeds:write)
--   BENCH_PORTFOLIO   portfolio id, sent as X-Service-Portfolio
--   BENCH_PROPERTIES  the property ids, comma-separated
--   BENCH_FEED        reviews | ota-rates | rate-suggestions
--   BENCH_ITEMS       items per batch (500)
--   BENCH_AT          an RFC 3339 time in the recent past (published_at,
--                     observed_at)
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local common = require "common" -- bench/common.lua
local function env(name) return common.env("feed.lua", name) end

local token, portfolio, feed = env("BENCH_TOKEN"), env("BENCH_PORTFOLIO"), env("BENCH_FEED")
local items, at = tonumber(env("BENCH_ITEMS")), env("BENCH_AT")
local props = {}
for p in env("BENCH_PROPERTIES"):gmatch("[^,]+") do props[#props + 1] = p end

wrk.method = "POST"
wrk.path = "/v2/feeds/" .. feed
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["X-Service-Portfolio"] = portfolio
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"

common.expect_status(200)

-- A stay date 1..700 days ahead of 2027-01-01, different per item.
local function date(k)
  local t = os.time({year = 2027, month = 1, day = 1, hour = 12}) + (k % 700) * 86400
  return os.date("!%Y-%m-%d", t)
end

local function item(k)
  local prop = props[k % #props + 1]
  if feed == "reviews" then
    return string.format('{"property_id":"%s","source":"google","external_id":"b%d-%d-%d",' ..
      '"rating":%d,"max_rating":5,"language":"en","text":"Great stay, friendly staff",' ..
      '"author":"Guest %d","published_at":"%s"}', prop, tid, n, k, 1 + k % 5, k, at)
  elseif feed == "ota-rates" then
    return string.format('{"property_id":"%s","ota":"booking.com","room_type_code":"R%d",' ..
      '"date":"%s","rate":{"currency":"PLN","minor_units":%d},"observed_at":"%s"}',
      prop, tid * 1000 + n % 1000, date(k + n), 30000 + k * 7 % 20000, at)
  end
  return string.format('{"property_id":"%s","room_type_code":"R%d","date":"%s",' ..
    '"current_rate":{"currency":"PLN","minor_units":45900},' ..
    '"proposed_rate":{"currency":"PLN","minor_units":%d},"trigger":"pickup_pace"}',
    prop, tid, date(k + n), 40000 + k * 7 % 20000)
end

function request()
  n = n + 1
  local parts = {}
  for k = 1, items do parts[k] = item(k) end
  return wrk.format(nil, nil, nil, '{"items":[' .. table.concat(parts, ",") .. ']}')
end
