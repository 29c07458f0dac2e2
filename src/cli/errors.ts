/** Bad usage: exit code 2, with the command's usage. */
export class UsageError extends Error {}

/**
 * A file, a row or a setting the CLI cannot load, or a load it must not run: exit code 1, with the message alone
 * (the usage would bury it and the command line was fine).
 */
export class LoadError extends Error {}
