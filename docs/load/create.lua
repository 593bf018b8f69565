-- wrk script: every request is a new intent, with its own Idempotency-Key
-- and its own domain, so each one lists and creates at the vendor.
-- TOKEN comes from the environment.
local threads = {}
local token = os.getenv("TOKEN")

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  n = 0
  run = os.time()
end

function request()
  n = n + 1
  local id = string.format("%d-%d-%d", run, tid, n)
  local body = '{"name":"Load","domain":"d' .. id .. '.load.test"}'
  return wrk.format("POST", "/api/licenses", {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = "load-" .. id,
  }, body)
end
