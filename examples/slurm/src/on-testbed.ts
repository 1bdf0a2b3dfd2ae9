// Runs main.ts against the Slurm test bed of @skyward/testing (a real slurmctld, two slurmd nodes and
// a login node in network namespaces on this machine; needs root), as CI does.
import { createSlurmTestbed, requireSlurmTestbed } from "@skyward/testing";

const skipReason = await requireSlurmTestbed();
if (skipReason !== undefined) {
  console.error(`skipped: ${skipReason}`);
  process.exit(0);
}
await using slurm = await createSlurmTestbed({ computeNodes: 2, gpusPerNode: 0 });
process.env.SLURM_LOGIN_HOST = slurm.login.host;
process.env.SLURM_LOGIN_KEY = slurm.login.identityFile;
process.env.SLURM_SHARED_DIRECTORY = slurm.sharedDirectory;
await import("./main.ts");
