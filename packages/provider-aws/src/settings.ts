/**
 * The settings of the AWS provider: what `AWS(settings)` and `skyward.toml`'s `[providers.x]` table
 * (`type = "aws"`) accept, validated with zod into {@link ResolvedAwsSettings}.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { ConfigurationError } from "@skyward/core";
import { z } from "zod";

/** Static AWS credentials. Secrets: never logged. */
export interface AwsCredentials {
  /** The access key id (`AKIA…`). */
  readonly accessKeyId: string;
  /** The secret access key. */
  readonly secretAccessKey: string;
  /** The session token of temporary credentials. */
  readonly sessionToken?: string;
}

/** A function returning credentials when asked (e.g. from a vault), called lazily by the AWS SDK. */
export type AwsCredentialsProvider = () => Promise<AwsCredentials>;

/** What the {@link AwsSettings.sshAddress} test seam receives: the EC2 instance as AWS describes it. */
export interface AwsInstanceAddresses {
  /** The EC2 instance id (`i-…`). */
  readonly id: string;
  /** Its public IPv4 address, or null. */
  readonly publicIp: string | null;
  /** Its private IPv4 address, or null. */
  readonly privateIp: string | null;
}

/**
 * What the {@link AwsSettings.sshAddress} test seam returns: where the pool reaches the instance
 * instead, and anything else the stand-in host needs.
 */
export interface SshAddressMapping {
  /** Host name or address to connect to. */
  readonly host: string;
  /** The SSH port. */
  readonly port: number;
  /** The login user; default the provider's `sshUser`. */
  readonly user?: string;
  /** The private key to log in with; default the pool's key pair. A secret: never logged. */
  readonly privateKey?: string;
  /** The stand-in host's Skyward root directory; default the provider's `root`. */
  readonly root?: string;
  /** The stand-in host's key fingerprint (`SHA256:…`); default trust on first use. */
  readonly hostKeyFingerprint?: string;
  /** The address other nodes reach the stand-in host on; default the instance's private address. */
  readonly privateIp?: string;
  /**
   * The self-destruct command for a worker on the stand-in host. Default `true` (nothing): the
   * stand-in host is not the instance, so it must never be shut down.
   */
  readonly selfDestruct?: string;
  /**
   * The instance metadata service the worker on the stand-in host polls for spot interruption
   * notices (a fake one: `@skyward/testing`'s `startFakeImds`). Default none: a stand-in host never
   * reads the real `169.254.169.254`, so it gets no notices.
   */
  readonly imdsEndpoint?: string;
}

/** Settings of {@link AWS}. Every field is optional. */
export interface AwsSettings {
  /**
   * The region. Default: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else the `region` of the profile
   * (`profile`, else `AWS_PROFILE`, else `default`) in `~/.aws/config` (`AWS_CONFIG_FILE`), else
   * `us-east-1`. A spec's `region` overrides it per pool.
   */
  region?: string;
  /**
   * Where `listInstances` and `cleanup` (`skyward instances`, `skyward down`) look, besides
   * {@link AwsSettings.region}: more regions, or `"all"` for every region enabled in the account
   * (`DescribeRegions`; refused, only the region and the recorded ones are searched, and the listing
   * says so). Default: the region, and every region this machine has launched a pool in (recorded in
   * `$SKYWARD_HOME/aws/regions.json`).
   */
  regions?: readonly string[] | "all";
  /**
   * Give each instance a public IPv4 address (`AssociatePublicIpAddress`), so SSH from outside the VPC
   * reaches it. Default `true`; `false` for a subnet (the given {@link AwsSettings.subnetId}, or the
   * default VPC's) reached from inside the VPC, over a VPN or peering: Skyward then connects to the
   * private address, and no public IPv4 address is billed.
   */
  associatePublicIp?: boolean;
  /**
   * Who may reach SSH (port 22) in the security group made per pool: `"anywhere"` (0.0.0.0/0, the
   * default, as SkyPilot and dstack do: the key pair is what guards it), `"client"` (this machine's
   * public address, asked of https://checkip.amazonaws.com, as a /32), or a list of IPv4 CIDRs.
   * Refused with {@link AwsSettings.securityGroupId}, whose own rules decide.
   */
  sshIngress?: "anywhere" | "client" | readonly string[];
  /**
   * The Price List Query API's endpoint, for on-demand prices per region: AWS's
   * (`https://api.pricing.us-east-1.amazonaws.com`, the default), `https://api.pricing.eu-central-1.amazonaws.com`
   * or `https://api.pricing.ap-south-1.amazonaws.com` (requests are signed for the region in the
   * host), or a fake's. Default AWS's, also beside an {@link AwsSettings.endpoint} of AWS's (a FIPS or
   * VPC endpoint serves EC2 only); {@link AwsSettings.endpoint} itself when that is not at AWS (moto).
   */
  pricingEndpoint?: string;
  /** Another EC2/SSM endpoint, e.g. a local moto server (`http://127.0.0.1:5000`). */
  endpoint?: string;
  /**
   * Credentials. Default: the standard AWS chain (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
   * `AWS_PROFILE` and `~/.aws`, SSO, web identity, ECS and EC2 instance roles), looked up lazily on
   * the first call.
   */
  credentials?: AwsCredentials | AwsCredentialsProvider;
  /** A named profile of `~/.aws/config` for the standard chain (instead of `AWS_PROFILE`). */
  profile?: string;
  /** An IAM instance profile (name or ARN) given to every instance, e.g. for S3 access. */
  instanceProfile?: string;
  /** Launch into this subnet (and its VPC) instead of the default VPC's subnets. */
  subnetId?: string;
  /** Use this security group instead of creating one per pool; it must allow SSH from here. */
  securityGroupId?: string;
  /** Use this existing key pair instead of creating one per pool; needs {@link AwsSettings.identityFile}. */
  keyName?: string;
  /** The private key file of {@link AwsSettings.keyName}. */
  identityFile?: string;
  /** Use this AMI instead of the Ubuntu / Deep Learning images looked up in SSM. */
  amiId?: string;
  /** The login user of the AMI. Default `ubuntu`. */
  sshUser?: string;
  /** Skyward's directory on each instance. Default `/opt/skyward`. */
  root?: string;
  /**
   * On-demand prices (USD per hour, by instance type) that override or extend the built-in table,
   * e.g. your negotiated or another region's prices.
   */
  onDemandPrices?: Readonly<Record<string, number>>;
  /**
   * Your own tags (key → value), e.g. for cost allocation, put on every instance and volume, and on the
   * security group, key pair and placement group of each pool, beside Skyward's own (`skyward:*`,
   * `Name`), which they can never replace: such keys are refused, as are AWS's reserved `aws:` ones.
   * At most {@link MAX_USER_TAGS}; keys 1–128 characters, values up to 256
   * (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions).
   */
  tags?: Readonly<Record<string, string>>;
  /**
   * `"maxHourlyCost"`: launch spot instances with `MaxPrice` set to the pool's `maxHourlyCost`, so
   * that AWS reclaims a node whose spot price rises above the cap instead of billing it. Off by
   * default: AWS advises against a max price (it raises interruptions; without one a spot instance
   * costs at most the on-demand price,
   * https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-best-practices.html), and a pool without
   * `maxHourlyCost` sets none either way.
   */
  spotMaxPrice?: "maxHourlyCost";
  /**
   * FOR TESTS ONLY. Maps an instance to the SSH address the pool uses instead of its own, so a
   * provider driven against a fake EC2 (moto) reaches real SSH hosts (a test bed). Never set it
   * against real AWS.
   */
  sshAddress?: (instance: AwsInstanceAddresses) => SshAddressMapping;
}

/** {@link AwsSettings} after validation, defaults applied. */
export interface ResolvedAwsSettings {
  readonly region: string;
  readonly regions: readonly string[] | "all";
  readonly associatePublicIp: boolean;
  readonly sshIngress: "anywhere" | "client" | readonly string[];
  readonly pricingEndpoint: string | undefined;
  readonly endpoint: string | undefined;
  readonly credentials: AwsCredentials | AwsCredentialsProvider | undefined;
  readonly profile: string | undefined;
  readonly instanceProfile: string | undefined;
  readonly subnetId: string | undefined;
  readonly securityGroupId: string | undefined;
  readonly keyName: string | undefined;
  readonly identityFile: string | undefined;
  readonly amiId: string | undefined;
  readonly sshUser: string;
  readonly root: string;
  readonly onDemandPrices: Readonly<Record<string, number>>;
  readonly tags: Readonly<Record<string, string>>;
  readonly spotMaxPrice: "maxHourlyCost" | undefined;
  readonly sshAddress: ((instance: AwsInstanceAddresses) => SshAddressMapping) | undefined;
}

const text = (what: string) =>
  z.string({ error: `expected ${what}` }).min(1, { message: `expected ${what}` });
const awsId = (prefix: string, what: string) =>
  z
    .string({ error: `expected ${what} ("${prefix}-…")` })
    .regex(new RegExp(`^${prefix}-[0-9a-f]{8,17}$`), { message: `expected ${what} ("${prefix}-…")` });

const credentialsSchema = z.union(
  [
    z.strictObject({
      accessKeyId: text("an access key id"),
      secretAccessKey: text("a secret access key"),
      sessionToken: text("a session token").optional(),
    }),
    z.custom<AwsCredentialsProvider>((value) => typeof value === "function"),
  ],
  { error: "expected { accessKeyId, secretAccessKey, sessionToken? } or a function returning them" },
);

const AWS_REGION = /^[a-z]{2}(-[a-z]+)+-\d+$/;

const regionSchema = z
  .string({ error: 'expected a region such as "us-east-1"' })
  .regex(AWS_REGION, { message: 'expected a region such as "us-east-1"' });

/**
 * Refuses a pool's `region` (a spec's, not the settings') that is no AWS region, before any request:
 * an Availability Zone such as `us-east-1a` would otherwise reach the SDK as a region and fail as an
 * unknown host.
 */
export function checkPoolRegion(region: string | undefined): void {
  if (region === undefined || AWS_REGION.test(region)) return;
  const zoneOf = /^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$/.exec(region)?.[1];
  const message = zoneOf
    ? `expected an AWS region such as "us-east-1": "${region}" is an Availability Zone (give its region, "${zoneOf}")`
    : `expected an AWS region such as "us-east-1", got ${JSON.stringify(region)}`;
  throw new ConfigurationError({ issues: [{ path: "region", message }] });
}

const IPV4_CIDR = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}\/([0-9]|[12]\d|3[0-2])$/;

/** The most tags of the user's: EC2 allows 50 per resource, and Skyward puts 7 of its own on an instance. */
export const MAX_USER_TAGS = 40;

const tagsSchema = z
  .record(
    z
      .string()
      .min(1, { message: "expected tag keys of 1 to 128 characters" })
      .max(128, { message: "expected tag keys of 1 to 128 characters" })
      .refine((key) => !/^aws:/i.test(key), { message: 'tag keys starting with "aws:" are reserved by AWS' })
      .refine((key) => !/^skyward:/i.test(key) && key !== "Name", {
        message: 'tag keys "skyward:*" and "Name" are Skyward\'s own, set on everything it creates',
      }),
    z
      .string({ error: "expected a tag value (a string)" })
      .max(256, { message: "expected tag values of at most 256 characters" }),
  )
  .refine((tags) => Object.keys(tags).length <= MAX_USER_TAGS, {
    message: `expected at most ${MAX_USER_TAGS} tags`,
  });

const SSH_INGRESS_MESSAGE =
  'expected "anywhere", "client" or a list of IPv4 CIDRs such as ["203.0.113.7/32"]';

const settingsSchema = z
  .strictObject({
    region: regionSchema.optional(),
    regions: z
      .union([z.literal("all"), z.array(regionSchema)], {
        error: 'expected "all" or a list of regions such as ["us-east-1", "us-west-2"]',
      })
      .optional(),
    associatePublicIp: z.boolean({ error: "expected true or false" }).default(true),
    sshIngress: z
      .union(
        [
          z.literal("anywhere"),
          z.literal("client"),
          z.array(z.string().regex(IPV4_CIDR, { message: SSH_INGRESS_MESSAGE })).min(1),
        ],
        {
          error: SSH_INGRESS_MESSAGE,
        },
      )
      .optional(),
    pricingEndpoint: z.url({ error: "expected the Price List API's endpoint URL" }).optional(),
    endpoint: z.url({ error: 'expected an endpoint URL such as "http://127.0.0.1:5000"' }).optional(),
    credentials: credentialsSchema.optional(),
    profile: text("a profile name").optional(),
    instanceProfile: text("an instance profile name or ARN").optional(),
    subnetId: awsId("subnet", "a subnet id").optional(),
    securityGroupId: awsId("sg", "a security group id").optional(),
    keyName: text("a key pair name").optional(),
    identityFile: text("the private key's path").optional(),
    amiId: awsId("ami", "an AMI id").optional(),
    sshUser: text("a user name").default("ubuntu"),
    root: z
      .string({ error: "expected an absolute directory other than /" })
      .refine((value) => value.startsWith("/") && value.replace(/\/+$/, "") !== "", {
        message: "expected an absolute directory other than /",
      })
      .default("/opt/skyward"),
    onDemandPrices: z
      .record(z.string(), z.number().positive({ message: "expected a price in USD per hour, > 0" }))
      .default({}),
    tags: tagsSchema.default({}),
    spotMaxPrice: z.literal("maxHourlyCost", { error: 'expected "maxHourlyCost"' }).optional(),
    sshAddress: z
      .custom<(instance: AwsInstanceAddresses) => SshAddressMapping>((value) => typeof value === "function", {
        message: "expected a function (for tests only)",
      })
      .optional(),
  })
  .superRefine((value, context) => {
    // The rule is put on the group made per pool: a given group is used as it is, never changed.
    if (value.securityGroupId !== undefined && value.sshIngress !== undefined)
      context.addIssue({
        code: "custom",
        path: ["sshIngress"],
        message:
          "applies to the security group made per pool; with securityGroupId that group's own rules decide who reaches SSH: leave sshIngress out, or securityGroupId",
      });
    if (value.keyName !== undefined && value.identityFile === undefined)
      context.addIssue({
        code: "custom",
        path: ["identityFile"],
        message: "expected the private key file of keyName",
      });
    if (value.identityFile !== undefined && value.keyName === undefined)
      context.addIssue({
        code: "custom",
        path: ["keyName"],
        message: "expected the key pair name of identityFile",
      });
  });

/**
 * Validates settings, throwing {@link ConfigurationError} with paths such as `AWS.region` (or, from
 * `skyward.toml`, relative ones the config loader prefixes with the provider's table).
 */
export function resolveAwsSettings(input: unknown, prefix = "AWS"): ResolvedAwsSettings {
  const result = settingsSchema.safeParse(input ?? {});
  if (!result.success) {
    // Messages never echo the value: it may be a secret (a key in the wrong field).
    const pathOf = (path: readonly PropertyKey[]) =>
      [prefix, ...path.map(String)].filter((part) => part !== "").join(".");
    throw new ConfigurationError({
      issues: result.error.issues.flatMap((issue) =>
        issue.code === "unrecognized_keys"
          ? issue.keys.map((key) => ({ path: pathOf([...issue.path, key]), message: "unknown field" }))
          : [{ path: pathOf(issue.path), message: issue.message }],
      ),
    });
  }
  const value = result.data;
  return Object.freeze({
    region: value.region ?? defaultRegion(value.profile),
    regions:
      value.regions === undefined || value.regions === "all"
        ? (value.regions ?? [])
        : Object.freeze([...value.regions]),
    associatePublicIp: value.associatePublicIp,
    sshIngress:
      value.sshIngress === undefined || typeof value.sshIngress === "string"
        ? (value.sshIngress ?? "anywhere")
        : Object.freeze([...value.sshIngress]),
    pricingEndpoint: value.pricingEndpoint,
    endpoint: value.endpoint,
    credentials: value.credentials,
    profile: value.profile,
    instanceProfile: value.instanceProfile,
    subnetId: value.subnetId,
    securityGroupId: value.securityGroupId,
    keyName: value.keyName,
    identityFile: value.identityFile,
    amiId: value.amiId,
    sshUser: value.sshUser,
    root: value.root.replace(/\/+$/, ""),
    onDemandPrices: Object.freeze({ ...value.onDemandPrices }),
    tags: Object.freeze({ ...value.tags }),
    spotMaxPrice: value.spotMaxPrice,
    sshAddress: value.sshAddress,
  });
}

/**
 * The region when none is set, as the AWS CLI and SDKs find it: `AWS_REGION`, `AWS_DEFAULT_REGION`,
 * then the profile's `region` in the shared config file (`AWS_CONFIG_FILE`, else `~/.aws/config`;
 * https://docs.aws.amazon.com/sdkref/latest/guide/feature-region.html), else `us-east-1`.
 */
export function defaultRegion(profile?: string, env: NodeJS.ProcessEnv = process.env): string {
  const valid = (region: string | undefined) =>
    region !== undefined && regionSchema.safeParse(region.trim()).success ? region.trim() : undefined;
  const fromEnv = valid(env.AWS_REGION) ?? valid(env.AWS_DEFAULT_REGION);
  if (fromEnv) return fromEnv;
  const name = profile ?? env.AWS_PROFILE ?? "default";
  let text: string;
  try {
    text = readFileSync(env.AWS_CONFIG_FILE ?? join(homedir(), ".aws", "config"), "utf8");
  } catch {
    return "us-east-1";
  }
  let inProfile = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/[#;].*$/, "").trim();
    const section = /^\[\s*(.+?)\s*\]$/.exec(line);
    if (section) {
      const header = section[1] ?? "";
      inProfile =
        header === (name === "default" ? "default" : `profile ${name}`) ||
        (header === name && name === "default");
      continue;
    }
    const entry = /^region\s*=\s*(\S+)$/.exec(line);
    if (inProfile && entry) return valid(entry[1]) ?? "us-east-1";
  }
  return "us-east-1";
}
