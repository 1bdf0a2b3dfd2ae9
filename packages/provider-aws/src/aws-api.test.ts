import { EC2ServiceException } from "@aws-sdk/client-ec2";
import { ConfigurationError, NoCapacityError, ProvisionError } from "@skyward/core";
import { machineErrorKind } from "@skyward/provider-utils";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { useFakeAwsEnvironment } from "../test/moto-server.js";
import { awsErrorCode, isCapacityError, isQuotaError, translateAwsError } from "./aws-api.js";
import { AWS } from "./aws-provider.js";

function ec2Error(code: string, status: number, message = "message from AWS"): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: status >= 500 ? "server" : "client",
    $metadata: { httpStatusCode: status },
    message,
  });
}

describe("translateAwsError", () => {
  it("reads the AWS error code", () => {
    expect(awsErrorCode(ec2Error("InvalidGroup.NotFound", 400))).toBe("InvalidGroup.NotFound");
    expect(awsErrorCode(new Error("plain"))).toBeUndefined();
    expect(isCapacityError(ec2Error("InsufficientInstanceCapacity", 500))).toBe(true);
    expect(isCapacityError(ec2Error("UnfulfillableCapacity", 400))).toBe(true);
    // A quota is not a lack of capacity: no other zone or market of the region helps.
    expect(isCapacityError(ec2Error("VcpuLimitExceeded", 400))).toBe(false);
    expect(isQuotaError(ec2Error("VcpuLimitExceeded", 400))).toBe(true);
    expect(isQuotaError(ec2Error("MaxSpotInstanceCountExceeded", 400))).toBe(true);
    expect(isCapacityError(ec2Error("InvalidParameterValue", 400))).toBe(false);
  });

  it("turns capacity errors into NoCapacityError, quota errors into a ProvisionError saying to request an increase", () => {
    const quota = translateAwsError(ec2Error("InstanceLimitExceeded", 400, "limit"), "RunInstances");
    expect(NoCapacityError.isInstance(quota)).toBe(false);
    expect(quota).toMatchObject({ isRetryable: false });
    expect((quota as Error).message).toContain("request a quota increase");
    const error = translateAwsError(
      ec2Error("InsufficientInstanceCapacity", 500, "no capacity"),
      "RunInstances",
    );
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts).toEqual([
      { provider: "aws", reason: "RunInstances: InsufficientInstanceCapacity: no capacity" },
    ]);
  });

  it("marks throttling and server errors retryable, permission errors not, with a hint", () => {
    const throttled = translateAwsError(
      ec2Error("RequestLimitExceeded", 503),
      "DescribeInstances",
    ) as ProvisionError;
    expect(ProvisionError.isInstance(throttled)).toBe(true);
    expect(throttled.isRetryable).toBe(true);
    const denied = translateAwsError(
      ec2Error("UnauthorizedOperation", 403, "not allowed"),
      "RunInstances",
    ) as ProvisionError;
    expect(denied.isRetryable).toBe(false);
    expect(denied.message).toBe(
      "AWS RunInstances failed: UnauthorizedOperation: not allowed (check the credentials and their IAM permissions)",
    );
    const network = translateAwsError(
      new Error("connect ECONNREFUSED 127.0.0.1:1"),
      "DescribeVpcs",
    ) as ProvisionError;
    expect(network.isRetryable).toBe(true);
  });

  it("every error has the machine-provider base's kind: what failed, and what the user does", () => {
    const kindOf = (code: string, status: number) =>
      machineErrorKind(translateAwsError(ec2Error(code, status, "x"), "RunInstances"));
    expect(kindOf("VcpuLimitExceeded", 400)).toBe("quota");
    expect(kindOf("OptInRequired", 401)).toBe("account");
    expect(kindOf("AuthFailure", 401)).toBe("auth");
    expect(kindOf("RequestLimitExceeded", 503)).toBe("rate-limit");
    expect(kindOf("InvalidInstanceID.NotFound", 400)).toBe("gone");
    expect(kindOf("InternalError", 500)).toBe("unavailable");
    expect(kindOf("InvalidParameterValue", 400)).toBe("bad-request");
    expect(machineErrorKind(translateAwsError(new Error("socket hang up"), "RunInstances"))).toBe(
      "unavailable",
    );
    // As the SDK throws it when nothing listens: a plain Error with the socket's code and `$metadata`.
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), {
      code: "ECONNREFUSED",
      $metadata: { attempts: 1, totalRetryDelay: 0 },
    });
    expect(machineErrorKind(translateAwsError(refused, "DescribeInstanceTypes"))).toBe("unavailable");
    const account = translateAwsError(ec2Error("OptInRequired", 401, "opt in"), "RunInstances") as Error;
    expect(account.message).toContain("this account may not use what was asked");
  });

  it("passes an abort's reason through", () => {
    const controller = new AbortController();
    const reason = new Error("stop");
    controller.abort(reason);
    expect(translateAwsError(ec2Error("InternalError", 500), "x", controller.signal)).toBe(reason);
  });
});

describe("credentials", () => {
  let restore: () => void = () => undefined;
  beforeEach(() => {
    restore = useFakeAwsEnvironment(false);
  });
  afterEach(() => restore());

  it("without any, the first call fails with a ConfigurationError saying how to set them", async () => {
    // A closed port as endpoint: even a credential found by mistake could not reach anything.
    const provider = AWS({ endpoint: "http://127.0.0.1:9" });
    const failure = provider.offers({
      query: { accelerator: null, allocation: "on-demand" },
      signal: AbortSignal.timeout(20_000),
    });
    const error = await failure.catch((caught: unknown) => caught);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).issues).toEqual([
      {
        path: "credentials",
        message: expect.stringMatching(
          /^no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/,
        ),
      },
    ]);
    expect((error as Error).message).toMatch(/configure a profile/);
  });

  it("a credentials function that fails is reported the same way", async () => {
    const provider = AWS({
      endpoint: "http://127.0.0.1:9",
      credentials: async () => {
        throw new Error("vault sealed");
      },
    });
    const error = await provider
      .offers({ query: { accelerator: null, allocation: "on-demand" }, signal: AbortSignal.timeout(20_000) })
      .catch((caught: unknown) => caught);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).cause).toMatchObject({ message: "vault sealed" });
  });
});
