-- wrk script: POST /v2/rate-decisions, one governed 3-property publish per
-- request (bench/decisions.sh). No Idempotency-Key, so every request is a
-- new decision; minor_units varies per request (always within the ceiling).
-- Every answer must be a 201: done() prints "bench-bad-status: N" with the
-- number that were not, and the first one's status and body.
-- Set by bench/decisions.sh:
--   BENCH_TOKEN       OAuth access token (client credentials, rates:write)
--   BENCH_PORTFOLIO   portfolio id, sent as X-Service-Portfolio
--   BENCH_PROPERTIES  the property ids, comma-separated
--   BENCH_CEILING     brand ceiling id
--   BENCH_APPROVER    approver_saml_subject (a user with revenue-approver)
--   BENCH_FROM, BENCH_TO   date_range (YYYY-MM-DD)
--   BENCH_MIN, BENCH_SPAN  minor_units in [MIN, MIN + SPAN)
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local common = require "common" -- bench/common.lua
local function env(name) return common.env("decision.lua", name) end

local token, portfolio = env("BENCH_TOKEN"), env("BENCH_PORTFOLIO")
local props = {}
for p in env("BENCH_PROPERTIES"):gmatch("[^,]+") do props[#props + 1] = '"' .. p .. '"' end
local min_units, span = tonumber(env("BENCH_MIN")), tonumber(env("BENCH_SPAN"))
-- Everything but minor_units, split around it.
local head = '{"properties":[' .. table.concat(props, ",") .. '],"room_type_code":"DBL",' ..
  '"date_range":{"from":"' .. env("BENCH_FROM") .. '","to":"' .. env("BENCH_TO") .. '"},' ..
  '"proposed_rate":{"currency":"PLN","minor_units":'
local tail = '},"governance":{"brand_ceiling_id":"' .. env("BENCH_CEILING") ..
  '","approver_saml_subject":"' .. env("BENCH_APPROVER") ..
  '","justification":"bench/decisions.sh load test"}}'

wrk.method = "POST"
wrk.path = "/v2/rate-decisions"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["X-Service-Portfolio"] = portfolio
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"

common.expect_status(201)

function request()
  n = n + 1
  -- Spread over the range, different per thread.
  local minor = min_units + (n * 7919 + tid * 104729) % span
  return wrk.format(nil, nil, nil, head .. minor .. tail)
end
