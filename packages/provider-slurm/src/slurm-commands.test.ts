/**
 * Parsing what Slurm's tools print. The samples follow the output formats documented on
 * https://slurm.schedmd.com/sinfo.html (`-N`, `-o` fields %N %P %c %m %G %T %o),
 * https://slurm.schedmd.com/squeue.html (`-o` fields %i %j %T %r %N %P %V %D %k) and
 * https://slurm.schedmd.com/sbatch.html (`--parsable`: "jobid[;cluster_name]") and
 * https://slurm.schedmd.com/scontrol.html (`show partition -o`: one line per partition); the end-to-end tests
 * read the real tools' output on the Slurm test bed.
 */
import { describe, expect, it } from "vitest";
import {
  expandHostList,
  jobComment,
  parseGpuGres,
  parseJobComment,
  parseJobs,
  parseNodes,
  parsePreemptModes,
  parseSubmittedJobId,
  sbatchArguments,
} from "./slurm-commands.js";

describe("Slurm's output", () => {
  it("host lists expand in order, zero padding kept", () => {
    expect(expandHostList("node[1-3]")).toEqual(["node1", "node2", "node3"]);
    expect(expandHostList("gpu[08-10,12],login")).toEqual(["gpu08", "gpu09", "gpu10", "gpu12", "login"]);
    expect(expandHostList("(null)")).toEqual([]);
  });

  it("GPU GRES, typed or not, with socket bindings and other GRES beside them", () => {
    expect(parseGpuGres("gpu:2")).toEqual({ count: 2, type: undefined });
    expect(parseGpuGres("gpu:a100:4(S:0-1),nic:1")).toEqual({ count: 4, type: "a100" });
    expect(parseGpuGres("(null)")).toEqual({ count: 0, type: undefined });
  });

  it("sinfo -N lines: the default partition marked, states without their flags", () => {
    const nodes = parseNodes(
      "node1|main*|4|4000|gpu:2|idle|10.0.0.3\nnode2|gpu|64|512000|gpu:h100:8(S:0-1)|mixed*|10.0.0.4\n",
    );
    expect(nodes).toEqual([
      expect.objectContaining({
        name: "node1",
        partition: "main",
        isDefaultPartition: true,
        gpus: 2,
        state: "idle",
      }),
      expect.objectContaining({
        name: "node2",
        partition: "gpu",
        gpus: 8,
        gpuType: "h100",
        state: "mixed",
        memoryMb: 512000,
        address: "10.0.0.4",
      }),
    ]);
  });

  it("squeue lines: a pending job has no nodes yet, a comment may hold the separator", () => {
    const jobs = parseJobs(
      "42|skyward-a|RUNNING|None|node[1-2]|main|2026-11-29T01:00:00|2|skyward:cluster=a;pool=p;region=main\n" +
        "43|other|PENDING|Priority|(null)|main|2026-11-29T01:00:01|1|x|y\n",
    );
    expect(jobs[0]).toMatchObject({ id: "42", state: "RUNNING", nodes: ["node1", "node2"], nodeCount: 2 });
    expect(jobs[1]).toMatchObject({
      id: "43",
      state: "PENDING",
      reason: "Priority",
      nodes: [],
      comment: "x|y",
    });
    expect(parseJobComment(jobs[0]?.comment ?? "")).toEqual({ cluster: "a", pool: "p", region: "main" });
    expect(parseJobComment("x|y")).toBeUndefined();
  });

  it("scontrol show partition -o: each partition's PreemptMode", () => {
    const modes = parsePreemptModes(
      "PartitionName=main AllowGroups=ALL Default=YES PreemptMode=OFF State=UP\nPartitionName=spot PriorityTier=1 PreemptMode=REQUEUE State=UP\n",
    );
    expect([...modes]).toEqual([
      ["main", "OFF"],
      ["spot", "REQUEUE"],
    ]);
  });

  it("sbatch --parsable prints the job id, with the cluster on a federation", () => {
    expect(parseSubmittedJobId("1234\n")).toBe("1234");
    expect(parseSubmittedJobId("1234;cluster1\n")).toBe("1234");
    expect(parseSubmittedJobId("")).toBeUndefined();
  });
});

describe("the pool's job", () => {
  it("asks for every setting and spec field, holds the allocation and is never requeued", () => {
    const args = sbatchArguments({
      jobName: "skyward-c1",
      comment: jobComment("c1", "p1", "gpu"),
      nodes: 2,
      partition: "gpu",
      account: "lab",
      qos: "normal",
      timeLimit: "2:00:00",
      gpus: { count: 4, type: "a100" },
      cpusPerNode: 16,
      memoryGbPerNode: 1.5,
      exclude: ["gpu01", "gpu02"],
      extra: ["--constraint=ib"],
      output: "/dev/null",
    });
    expect(args).toEqual([
      "--parsable",
      "--job-name=skyward-c1",
      "--comment=skyward:cluster=c1;pool=p1;region=gpu",
      "--nodes=2",
      "--ntasks-per-node=1",
      "--no-requeue",
      "--output=/dev/null",
      "--partition=gpu",
      "--account=lab",
      "--qos=normal",
      "--time=2:00:00",
      "--gres=gpu:a100:4",
      "--cpus-per-task=16",
      "--mem=1536M",
      "--exclude=gpu01,gpu02",
      "--constraint=ib",
      "--wrap",
      "exec sleep infinity",
    ]);
  });
});
