/**
 * The shared setup of the suites that run against moto: fake AWS credentials with a sealed-off
 * credential chain, a scratch SKYWARD_HOME, a moto server and an EC2 client for it, all started
 * before the suite and stopped/restored after it.
 */
import { EC2Client } from "@aws-sdk/client-ec2";
import { type ScratchSkywardHome, useScratchSkywardHome } from "@skyward/testing";
import { afterAll, beforeAll } from "vitest";
import { type MotoServer, startMoto, useFakeAwsEnvironment } from "./moto-server.js";

/** What {@link useMotoSuite} started; read it in tests and hooks (it throws before `beforeAll`). */
export interface MotoSuite {
  /** The moto server. */
  readonly moto: MotoServer;
  /** An EC2 client for moto, in `us-east-1`, with the fake credentials. */
  readonly ec2: EC2Client;
  /** The scratch SKYWARD_HOME. */
  readonly home: ScratchSkywardHome;
}

/**
 * Registers the `beforeAll`/`afterAll` hooks of a moto suite in the current `describe`: call it
 * first in the block, so that its `afterAll` runs after the block's own (hooks run as a stack).
 */
export function useMotoSuite(homePrefix: string): MotoSuite {
  let moto: MotoServer | undefined;
  let ec2: EC2Client | undefined;
  let home: ScratchSkywardHome | undefined;
  let restoreEnvironment: () => void = () => undefined;

  beforeAll(async () => {
    restoreEnvironment = useFakeAwsEnvironment();
    home = await useScratchSkywardHome(homePrefix);
    moto = await startMoto();
    ec2 = new EC2Client({
      region: "us-east-1",
      endpoint: moto.endpoint,
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
  });

  afterAll(async () => {
    ec2?.destroy();
    await moto?.stop();
    restoreEnvironment();
    await home?.restore();
  });

  const started = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) throw new Error(`the moto suite's ${name} is used before its beforeAll ran`);
    return value;
  };
  return {
    get moto() {
      return started(moto, "moto server");
    },
    get ec2() {
      return started(ec2, "EC2 client");
    },
    get home() {
      return started(home, "scratch SKYWARD_HOME");
    },
  };
}
