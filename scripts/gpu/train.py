# A small training loop for the gpu-watch check: resnet50, random weights,
# batches either resident on the GPU ("mem") or built on the CPU by a
# deliberately slow loader ("slow").
import sys, time, torch, torchvision
mode, secs = sys.argv[1], float(sys.argv[2])
dev = "cuda" if torch.cuda.is_available() else "cpu"
model = torchvision.models.resnet50() if dev == "cuda" else torchvision.models.resnet18()
model = model.to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
bs = 128 if dev == "cuda" else 4
xg = torch.randn(bs, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
yg = torch.randint(0, 1000, (bs,), device=dev)
t0, steps = time.time(), 0
print("pid", __import__("os").getpid(), mode, dev, flush=True)
while time.time() - t0 < secs:
    if mode == "slow":
        time.sleep(0.25)  # the slow loader: decode on a few cores
        x = torch.randn(bs, 3, 224, 224).to(dev, non_blocking=False).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (bs,)).to(dev)
    else:
        x, y = xg, yg
    with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    steps += 1
    if dev == "cuda" and steps % 10 == 0:
        torch.cuda.synchronize()
if dev == "cuda":
    torch.cuda.synchronize()
el = time.time() - t0
print(f"{mode}: {steps} steps in {el:.1f}s = {steps*bs/el:.0f} img/s", flush=True)
