-- wrk script: GET of one list page (BENCH_PATH, a cursor included for a
-- deep page), for its latency percentiles (bench/feeds.py). Every answer
-- must be a 200 (common.lua).
--   BENCH_TOKEN, BENCH_PORTFOLIO, BENCH_PATH
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local common = require "common" -- bench/common.lua
local function env(name) return common.env("list.lua", name) end

wrk.method = "GET"
wrk.path = env("BENCH_PATH")
wrk.headers["Authorization"] = "Bearer " .. env("BENCH_TOKEN")
wrk.headers["X-Service-Portfolio"] = env("BENCH_PORTFOLIO")
wrk.headers["Accept"] = "application/json"

common.expect_status(200)
