import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";
import { containerImageSchema, containers, DockerImage } from "./containers.js";

function failure(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as Error).message;
  }
  throw new Error("expected a ConfigurationError");
}

describe("containers.cuda", () => {
  it("defaults to the cudnn-runtime variant on Ubuntu 22.04 from Docker Hub, as the reference", () => {
    const image = containers.cuda("12.9");
    expect(image.tag).toBe("nvidia/cuda:12.9.1-cudnn-runtime-ubuntu22.04");
    expect([image.cuda, image.ubuntu]).toEqual(["12.9", "22.04"]);
    expect(String(image)).toBe(image.tag);
    expect(`${image}`).toBe(image.tag);
    expect(Object.isFrozen(image)).toBe(true);
  });

  it("builds each variant, Ubuntu release and registry", () => {
    expect(containers.cuda("12.9", { variant: "runtime", ubuntu: "24.04" }).tag).toBe(
      "nvidia/cuda:12.9.1-runtime-ubuntu24.04",
    );
    expect(containers.cuda("12.9", { variant: "devel", ubuntu: "24.04" }).tag).toBe(
      "nvidia/cuda:12.9.1-devel-ubuntu24.04",
    );
    expect(containers.cuda("12.8", { variant: "cudnn-runtime", ubuntu: "24.04" }).tag).toBe(
      "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04",
    );
    expect(containers.cuda("12.9", { variant: "runtime", ubuntu: "24.04", repository: "nvidia" }).tag).toBe(
      "nvcr.io/nvidia/cuda:12.9.1-runtime-ubuntu24.04",
    );
    // Vast.ai's default in the reference is exactly this image.
    expect(containers.cuda("12.9", { variant: "runtime", ubuntu: "24.04", repository: "nvidia" }).tag).toBe(
      "nvcr.io/nvidia/cuda:12.9.1-runtime-ubuntu24.04",
    );
  });

  it("uses the .0 release for a version outside the table", () => {
    const image = containers.cuda("13.0", { ubuntu: "24.04" });
    expect(image.tag).toBe("nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04");
    expect(image.cuda).toBe("13.0");
  });

  it("refuses bad input, naming the field and what was expected", () => {
    expect(failure(() => containers.cuda("12"))).toMatch(
      /containers\.cuda\.version: expected a CUDA version major\.minor like "12\.9", received "12"/,
    );
    expect(failure(() => containers.cuda("12.9", { variant: "base" as never }))).toMatch(
      /containers\.cuda\.options\.variant: expected "runtime", "devel" or "cudnn-runtime", received "base"/,
    );
    expect(failure(() => containers.cuda("12.9", { ubuntu: "noble" }))).toMatch(
      /containers\.cuda\.options\.ubuntu: expected an Ubuntu release like "24\.04", received "noble"/,
    );
    expect(failure(() => containers.cuda("12.9", { repository: "quay" as never }))).toMatch(
      /options\.repository: expected "dockerhub" or "nvidia"/,
    );
    expect(failure(() => containers.cuda("12.9", { ubunt: "22.04" } as never))).toMatch(
      /options\.ubunt: unknown field/,
    );
  });
});

describe("containers.ubuntu", () => {
  it("is ubuntu:24.04 by default", () => {
    const image = containers.ubuntu();
    expect(image.tag).toBe("ubuntu:24.04");
    expect([image.cuda, image.ubuntu]).toEqual([undefined, "24.04"]);
    expect(containers.ubuntu("22.04").tag).toBe("ubuntu:22.04");
  });

  it("refuses what is not a release", () => {
    expect(failure(() => containers.ubuntu("latest"))).toMatch(/containers\.ubuntu\.version: expected/);
  });
});

describe("containers.pytorch", () => {
  it("maps a PyTorch release to its NGC container and the CUDA it carries", () => {
    const image = containers.pytorch("2.8");
    expect(image.tag).toBe("nvcr.io/nvidia/pytorch:25.04-py3");
    expect(image.cuda).toBe("12.9");
    expect(containers.pytorch("2.6").tag).toBe("nvcr.io/nvidia/pytorch:24.11-py3");
    expect(containers.pytorch("2.7").cuda).toBe("12.8");
  });

  it("records a CUDA override without changing the tag", () => {
    const image = containers.pytorch("2.8", { cuda: "12.8" });
    expect([image.tag, image.cuda]).toEqual(["nvcr.io/nvidia/pytorch:25.04-py3", "12.8"]);
  });

  it("refuses a release without a known image instead of pulling latest", () => {
    expect(failure(() => containers.pytorch("3.0"))).toMatch(
      /containers\.pytorch\.version: expected a PyTorch version with a known image: "2\.6", "2\.7", "2\.8", received "3\.0"; for another image use DockerImage\.of/,
    );
    expect(failure(() => containers.pytorch("2.8", { cuda: "twelve" }))).toMatch(
      /containers\.pytorch\.options\.cuda/,
    );
  });
});

describe("containers.runpodPytorch and runpodBase", () => {
  it("are RunPod's images, 2.8 and CUDA 12.9 by default", () => {
    const image = containers.runpodPytorch();
    expect(image.tag).toBe("runpod/pytorch:2.8.0-py3.13-cuda12.8.1-devel-ubuntu24.04");
    expect(image.cuda).toBe("12.8");
    expect(containers.runpodPytorch("2.6").tag).toBe(
      "runpod/pytorch:2.6.0-py3.12-cuda12.6.3-devel-ubuntu24.04",
    );
    expect(containers.runpodBase().tag).toBe("runpod/base:1.0.3-cuda1290-ubuntu2204");
    expect(containers.runpodBase({ cuda: "12.6" }).tag).toBe("runpod/base:1.0.3-cuda1260-ubuntu2204");
  });

  it("refuse versions RunPod publishes no image for", () => {
    expect(failure(() => containers.runpodPytorch("1.13"))).toMatch(/containers\.runpodPytorch\.version/);
    expect(failure(() => containers.runpodBase({ cuda: "11.8" }))).toMatch(
      /containers\.runpodBase\.cuda: expected a CUDA version with a RunPod base image: "12\.6", "12\.8", "12\.9", received "11\.8"/,
    );
  });
});

describe("DockerImage.of", () => {
  it("wraps any reference, with optional metadata", () => {
    const plain = DockerImage.of("my-registry.io/custom:latest");
    expect([plain.tag, plain.cuda, plain.ubuntu]).toEqual([
      "my-registry.io/custom:latest",
      undefined,
      undefined,
    ]);
    const described = containers.DockerImage.of(`localhost:5000/team/trainer:1.4@sha256:${"a".repeat(64)}`, {
      cuda: "12.9",
      ubuntu: "24.04",
    });
    expect([described.cuda, described.ubuntu]).toEqual(["12.9", "24.04"]);
    expect(DockerImage.isDockerImage(described)).toBe(true);
    expect(DockerImage.isDockerImage("ubuntu:24.04")).toBe(false);
  });

  it("refuses what no registry could pull, naming the field", () => {
    expect(failure(() => DockerImage.of("My Image"))).toMatch(
      /DockerImage\.of\.tag: expected a Docker image reference like/,
    );
    expect(failure(() => DockerImage.of("repo/Name:tag"))).toMatch(/DockerImage\.of\.tag/);
    expect(failure(() => DockerImage.of(""))).toMatch(/DockerImage\.of\.tag/);
    expect(failure(() => DockerImage.of("ubuntu:24.04", { cuda: "latest" }))).toMatch(
      /DockerImage\.of\.metadata\.cuda: expected a CUDA version/,
    );
  });
});

describe("containerImageSchema (what providers accept)", () => {
  it("takes a tag string or a DockerImage and yields the tag", () => {
    expect(parseInput(containerImageSchema, "ubuntu:24.04")).toBe("ubuntu:24.04");
    expect(parseInput(containerImageSchema, containers.cuda("12.9"))).toBe(
      "nvidia/cuda:12.9.1-cudnn-runtime-ubuntu22.04",
    );
    // Vast.ai's automatic tag is accepted as Vast.ai documents it.
    expect(parseInput(containerImageSchema, "vastai/base-image:@vastai-automatic-tag")).toBe(
      "vastai/base-image:@vastai-automatic-tag",
    );
  });

  it("refuses anything else with what was expected", () => {
    expect(failure(() => parseInput(containerImageSchema, 42, "RunPod.containerImage"))).toMatch(
      /RunPod\.containerImage: expected an image tag string or a DockerImage/,
    );
    expect(failure(() => parseInput(containerImageSchema, "bad image", "VastAI.dockerImage"))).toMatch(
      /VastAI\.dockerImage: expected a Docker image reference/,
    );
    expect(
      failure(() =>
        parseInput(containerImageSchema, { tag: "Bad Tag", cuda: undefined }, "Novita.dockerImage"),
      ),
    ).toMatch(/Novita\.dockerImage: expected a Docker image reference/);
  });
});
