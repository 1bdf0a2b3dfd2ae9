/**
 * `@skyward/provider-slurm` — a team's own Slurm cluster as a Skyward pool: allocations through the
 * login node, workers as `srun` steps, the job's time limit as the hard TTL.
 */
export {
  expandHostList,
  parseGpuGres,
  parseJobs,
  parseNodes,
  type SlurmJob,
  type SlurmNode,
  sbatchArguments,
} from "./slurm-commands.js";
export { createProviderFromConfig, Slurm } from "./slurm-provider.js";
export type { SlurmDeclared, SlurmLoginInput, SlurmSettings } from "./slurm-settings.js";
export type { SlurmClusterData } from "./slurm-worker.js";
