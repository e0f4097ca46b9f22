# prepshards BatchReader -> pinned host buffers -> .cuda(non_blocking=True),
# against feed-test's figure on the same shards; checks one batch's bytes.
import sys, time, hashlib, numpy as np, torch
import prepshards as ps
from prepshards import _native
path = sys.argv[1]
cuda = torch.cuda.is_available()
print("torch", torch.__version__, "numpy", np.__version__, "cuda", cuda, "native kernel", _native.why_not or "loaded", flush=True)
for shuffle in (False, True):
    for epoch in range(2):
        r = ps.BatchReader(path, batch_size=256, as_tensor=True, pin_memory=cuda, shuffle=shuffle, seed=1)
        r.set_epoch(epoch)
        n = nbytes = 0
        stream = torch.cuda.Stream() if cuda else None
        t0 = time.perf_counter()
        first = None
        for x, y in r:
            if cuda:
                with torch.cuda.stream(stream):
                    g = x.cuda(non_blocking=True); gy = y.cuda(non_blocking=True)
                # the ring reuses x: wait before the reader refills it
                stream.synchronize()
            else:
                g = x.clone()
            if first is None:
                first = (hashlib.sha256(x.numpy().tobytes()).hexdigest(), hashlib.sha256(g.cpu().numpy().tobytes()).hexdigest())
            n += x.shape[0]; nbytes += x.numel() * x.element_size()
        if cuda:
            torch.cuda.synchronize()
        el = time.perf_counter() - t0
        print(f"shuffle={shuffle} epoch={epoch}: {n} samples {nbytes/1e9:.2f} GB in {el:.2f}s = {n/el:.0f} samples/s {nbytes/el/1e9:.2f} GB/s; first batch host==device: {first[0]==first[1]}", flush=True)
if cuda:
    h = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True); d = torch.empty_like(h, device="cuda")
    for _ in range(3): d.copy_(h, non_blocking=True)
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(10): d.copy_(h, non_blocking=True)
    torch.cuda.synchronize(); print(f"torch pinned H2D: {10*h.numel()/(time.perf_counter()-t0)/1e9:.1f} GB/s")
