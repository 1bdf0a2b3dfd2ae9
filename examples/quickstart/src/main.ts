// The demo: builds a pool request, validates it, and prints the resolved pool spec the rest of
// Skyward consumes. (Running Python tasks on a local pool comes with the Local provider.)
import * as sky from "@skyward/core";

const request = await sky.resolveComputeInput({
  accelerator: sky.accelerators.A100({ memory: "40GB", count: 8 }),
  nodes: sky.nodes({ desired: 4, min: 2 }),
  image: {
    pip: ["numpy"],
    env: { HF_HOME: "/data/hf" },
  },
  volumes: [{ bucket: "my-datasets", mount: "/data" }],
  ttl: sky.time.minutes(10),
  options: { worker: { concurrency: 4 } },
});

const [spec] = request.specs;
if (!spec) throw new Error("no spec resolved");
console.log("Resolved pool spec:");
console.log(
  JSON.stringify(
    {
      provider: spec.provider?.name ?? "local (default)",
      accelerator: `${spec.acceleratorCount}x ${spec.acceleratorName} (${spec.acceleratorMemoryGb} GB)`,
      nodes: spec.nodes,
      allocation: spec.allocation,
      ttl: spec.ttl,
      worker: spec.worker,
      image: { python: spec.image.python, pip: spec.image.pip, env: spec.image.env },
      envHash: sky.envHash(spec.image),
      volumes: spec.volumes,
      timeouts: { provision: spec.provisionTimeout, ssh: spec.sshTimeout, bootstrap: spec.bootstrapTimeout },
    },
    null,
    2,
  ),
);

// Bad input fails before anything starts, naming each field and what was expected.
try {
  await sky.resolveComputeInput({
    nodes: sky.nodes({ desired: 4, min: 2 }),
    volumes: [{ bucket: "my-datasets", mount: "data" }],
    ttl: -1,
  });
} catch (error) {
  if (!sky.ConfigurationError.isInstance(error)) throw error;
  console.log("\nA bad request is refused before any machine starts:");
  for (const issue of error.issues) console.log(`  ${issue.path}: ${issue.message}`);
}
