/**
 * What the torch plugin's end-to-end suites share: Debian's interpreter (python3-torch is installed
 * for it, and the workers' venv sees it), the DDP tasks and their checks (from `@skyward/testing`,
 * which the Kubernetes provider's suite shares) and why the suites cannot run here.
 */
import * as sky from "@skyward/core";
import { ddpTasks, requireSystemPython, requireTestbed } from "@skyward/testing";
import { type TorchOptions, torch } from "../src/index.js";

export type { Gradients, GroupInfo } from "@skyward/testing";
export {
  expectAllReduceSum,
  expectClose as close,
  expectDdpAgreement,
  expectGlooWorld,
} from "@skyward/testing";

export const SYSTEM_PYTHON = "/usr/bin/python3";
export const tasks = ddpTasks.file;
export const { groupInfo, allReduceSum, ddpGradients } = ddpTasks;

/** A pool of `nodes` Local nodes with `torch(plugin)` (default gloo on the CPU) and the DDP tasks. */
export function localTorchPool(nodes: number, plugin: TorchOptions = { backend: "gloo", cuda: "cpu" }) {
  return sky.compute({
    nodes,
    image: { python: SYSTEM_PYTHON, includes: [tasks] },
    plugins: [torch(plugin)],
    options: { console: false },
  });
}

/**
 * Why a suite cannot run here: no torch for /usr/bin/python3 (`torchMissing`), or that, or no test bed
 * (`testbedMissing`); undefined when it can. Under CI, throws instead.
 */
export async function torchSkipReasons(purpose: string) {
  const torchMissing = await requireSystemPython("torch.distributed", {
    python: SYSTEM_PYTHON,
    install: "python3-torch",
    purpose,
  });
  return { torchMissing, testbedMissing: torchMissing ?? (await requireTestbed()) };
}
