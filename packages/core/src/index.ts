/**
 * `@skyward/core` — run Python functions on cloud GPU pools from TypeScript.
 *
 * Use it as a namespace: `import * as sky from "@skyward/core"`.
 */

export type {
  ConfigLocations,
  CreateProviderFromConfig,
  NamedPool,
  PoolEntry,
  ProviderEntry,
  SkywardConfig,
} from "./config/config-file.js";
export { loadConfig, PROVIDER_PACKAGES, resolveNamedPool } from "./config/config-file.js";
export type { LaunchCommandFields, LaunchContext } from "./contract/launch-command.js";
export { LaunchCommand } from "./contract/launch-command.js";
export type {
  AroundClient,
  AroundClientResult,
  BootstrapFactory,
  ImageTransform,
  JsonValue,
  LauncherTransform,
  PluginBootstrapOp,
  PluginHook,
  PluginWorker,
  PluginWorkerInput,
  PoolHandle,
  WorkerModule,
  WorkersPerNode,
} from "./contract/plugin.js";
export { isPlugin, Plugin, PluginError } from "./contract/plugin.js";
// Contracts: providers, plugins, launch commands
export type {
  CleanupOptions,
  CleanupResult,
  Cluster,
  ClusterSsh,
  Instance,
  InstanceSsh,
  InstanceStatus,
  LeftPoolResource,
  Offer,
  OfferQuery,
  PoolResource,
  Provider,
  ProviderCallOptions,
  ProviderCapabilities,
  ProviderV1,
  ShellOp,
  WorkerEndpoint,
  WorkerEnvironment,
  WorkerLaunchRequest,
} from "./contract/provider.js";
export {
  clusterFromInstance,
  isProvider,
  offerPrice,
  offerQuery,
  PROVIDER_SPECIFICATION_VERSION,
  prefersSpot,
} from "./contract/provider.js";
// Errors
export type { ConfigurationIssue, ProvisionAttempt, SkywardErrorOptions } from "./errors/errors.js";
export {
  BootstrapError,
  CancelledError,
  ConfigurationError,
  ConnectionError,
  FunctionNotFoundError,
  NoCapacityError,
  NoOffersError,
  ProtocolError,
  ProvisionError,
  RemoteTaskError,
  SerializationError,
  SkywardError,
  TaskTimeoutError,
  WorkerDiedError,
} from "./errors/errors.js";
export type { LocalCluster, LocalSettings } from "./local/local-provider.js";
export { Local } from "./local/local-provider.js";
export type { ConsoleSink } from "./observe/console.js";
// Events
export type {
  BootstrapPhaseEvent,
  ErrorOccurredEvent,
  EventBase,
  EventHandler,
  EventHubOptions,
  EventOf,
  LogEvent,
  MetricEvent,
  NodeBootstrappedEvent,
  NodeDestroyedEvent,
  NodeEvent,
  NodeEventBase,
  NodeLostEvent,
  NodePreemptedEvent,
  NodeProvisionedEvent,
  NodeReadyEvent,
  NodeReplacedEvent,
  PoolDestroyedEvent,
  PoolEvent,
  PoolReadyEvent,
  PoolState,
  PoolStateEvent,
  ScalingEvent,
  SkywardEvent,
  SkywardEventType,
  TaskCancelledEvent,
  TaskCompletedEvent,
  TaskEvent,
  TaskEventBase,
  TaskFailedEvent,
  TaskQueuedEvent,
  TaskStartedEvent,
} from "./observe/events.js";
export { EventHub, POOL_STATES } from "./observe/events.js";
export type { LogRecord } from "./observe/log-file.js";
export { formatLogRecord, parseLogLine, readLogRecords } from "./observe/log-file.js";
export type {
  BuiltinMetricCollector,
  CustomMetricCollector,
  DiskMetricCollector,
  MetricCollector,
  MetricCollectorKind,
  MetricOptions,
} from "./observe/metrics.js";
export { metrics } from "./observe/metrics.js";
export type {
  ComputeOptions,
  PoolNode,
  ResultOf,
  RunOptions,
  StreamOptions,
  TaskHandle,
  WaitOptions,
} from "./pool/pool.js";
export { compute, Pool, withCompute } from "./pool/pool.js";
// Python functions, pools and dispatch
export type {
  Kwargs,
  KwargsArgument,
  Pending,
  PendingStream,
  PendingTask,
  PythonFunction,
  PythonFunctionOptions,
  PythonStreamFunction,
} from "./pool/python-function.js";
export { isPending, kwargs, python } from "./pool/python-function.js";
// Accelerators
export type {
  Accelerator,
  AcceleratorCatalogEntry,
  AcceleratorFactories,
  AcceleratorManufacturer,
  AcceleratorName,
  AcceleratorOptions,
  AcceleratorOptionsFor,
  CustomAcceleratorOptions,
} from "./spec/accelerators.js";
export {
  acceleratorCatalog,
  acceleratorFromName,
  accelerators,
  canonicalAcceleratorName,
} from "./spec/accelerators.js";
// Pool requests and configuration files
export type {
  ComputeInput,
  FlatComputeInput,
  MultiSpecComputeInput,
  NamedComputeInput,
  ResolvedCompute,
} from "./spec/compute-input.js";
export { resolveComputeInput } from "./spec/compute-input.js";
export type { Image, ImageInput, PipIndex } from "./spec/image.js";
export { contentHash, DEFAULT_IMAGE, envHash, extendImage, image, pipIndex } from "./spec/image.js";
export type {
  ConsoleMode,
  LogConfig,
  LogConfigInput,
  LogLevel,
  Options,
  OptionsInput,
  SelectionStrategy,
  Worker,
  WorkerInput,
} from "./spec/options.js";
export { logConfig, options, worker } from "./spec/options.js";
// Specs, topology, volumes, images, options
export type {
  AllocationStrategy,
  Architecture,
  NodeSpec,
  Nodes,
  NodesInput,
  PoolSpec,
  Spec,
  SpecInput,
} from "./spec/spec.js";
export { ALLOCATION_STRATEGIES, nodes, resolvePoolSpec, spec } from "./spec/spec.js";
export { time } from "./spec/time.js";
export type { StorageEndpoint, Volume, VolumeInput } from "./spec/volume.js";
export { FORBIDDEN_MOUNTS, volume } from "./spec/volume.js";
export type { SshClusterData, SshHost, SshHostInput, SshSettings } from "./ssh/ssh-provider.js";
export { SSH } from "./ssh/ssh-provider.js";
export { version } from "./version.js";
