/**
 * `@skyward/plugin-torch` — PyTorch for Skyward pools: the wheels for your CUDA build, and
 * `torch.distributed` initialised on every worker.
 */
export { type TorchBackend, type TorchCuda, type TorchOptions, torch } from "./torch.js";
