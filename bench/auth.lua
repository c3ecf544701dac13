-- wrk script: authenticated GET against revopsd (the same headers are sent
-- to nginx too, where they are ignored, so both targets parse the same
-- request). Set by bench/run.sh:
--   BENCH_TOKEN      OAuth access token (client credentials)
--   BENCH_PORTFOLIO  portfolio id, sent as X-Service-Portfolio
local token = os.getenv("BENCH_TOKEN")
local portfolio = os.getenv("BENCH_PORTFOLIO")
if token == nil or token == "" or portfolio == nil or portfolio == "" then
  io.stderr:write("auth.lua: BENCH_TOKEN and BENCH_PORTFOLIO must be set\n")
  os.exit(2)
end

wrk.method = "GET"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["X-Service-Portfolio"] = portfolio
wrk.headers["Accept"] = "application/json"
