/**
 * `@skyward/core/logs` — the pools' log files (`options.logging`): reading, following and writing
 * their JSON lines, for tools built on Skyward (`skyward logs`). See `docs/logging.md`.
 */
export type { LogFileWriterOptions, LogRecord, LogRotation } from "./observe/log-file.js";
export {
  eventLogLevel,
  eventLogRecord,
  formatLogRecord,
  isLogLevel,
  LOG_LEVELS,
  LogFileWriter,
  logLevelRank,
  parseLogLine,
  parseRotation,
  resolveLogFilePath,
} from "./observe/log-file.js";
export {
  logFileGenerations,
  type OpenLogGeneration,
  openLogGenerations,
  readLogRecords,
} from "./observe/log-generations.js";
