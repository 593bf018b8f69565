-- wrk script: the same intent retried over and over: the replay fast path.
local token = os.getenv("TOKEN")
wrk.method = "POST"
wrk.path = "/api/licenses"
wrk.body = '{"name":"Load","domain":"replay.load.test"}'
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Idempotency-Key"] = "load-replay"
