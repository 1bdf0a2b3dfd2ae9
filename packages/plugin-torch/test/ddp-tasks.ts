/**
 * What the torch plugin's end-to-end suites share: Debian's interpreter (python3-torch is installed
 * for it, and the workers' venv sees it), the DDP tasks and their checks (from `@skyward/testing`,
 * which the Kubernetes provider's suite shares) and why the suites cannot run here.
 */
import { ddpTasks, requireSystemPython, requireTestbed } from "@skyward/testing";

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
