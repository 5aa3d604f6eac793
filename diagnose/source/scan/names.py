"""The qualified names the scan itself recognises (compile entry points, compiler settings, the compile call's
keywords) and the clocks a timed loop reads, which more than one probe's finder asks about."""

COMPILE = "torch.compile"
CONFIG_PREFIXES = ("torch._dynamo.config", "torch._inductor.config")
COMPILE_KWS = ("mode", "fullgraph", "dynamic", "backend", "options")
TIME_FUNCS = {"time.time", "time.perf_counter", "time.monotonic", "time.perf_counter_ns", "time.time_ns"}
