/** A mistake in how the command was called (unknown flag, provider or command): exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}
