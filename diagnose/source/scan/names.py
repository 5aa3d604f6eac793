"""The qualified names the scan recognises: compile entry points, autotuning, extension builds, graph
capture, timing calls, and the calls that count as settings or as cheap (not work) at import."""

COMPILE = "torch.compile"
AUTOTUNE = "triton.autotune"
EXTENSION_LOADS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
CAPTURE_CTX = {"torch.cuda.graph", "torch.cuda.graphs.graph"}
GRAPHED = {"torch.cuda.make_graphed_callables", "torch.cuda.graphs.make_graphed_callables"}
CONFIG_PREFIXES = ("torch._dynamo.config", "torch._inductor.config")
COMPILE_KWS = ("mode", "fullgraph", "dynamic", "backend", "options")
TIME_FUNCS = {"time.time", "time.perf_counter", "time.monotonic", "time.perf_counter_ns", "time.time_ns"}
CHEAP_CALLS = {"dict", "list", "set", "tuple", "super", "object", "len", "int", "float", "str", "print",
               "isinstance", "getattr", "setattr", "hasattr", "range", "enumerate", "zip", "min", "max", "sorted",
               "defaultdict", "OrderedDict", "Lock", "RLock"}
SETTINGS_CALLS = ("torch.manual_seed", "torch.set_", "torch.backends", "torch.use_deterministic",
                  "torch._dynamo.config",
                  "torch._inductor.config", "random.seed", "warnings.", "logging.", "os.environ")
