// Web globals the stackbone host provides to agent code (the JS engine has no
// DOM and no Node.js). Include this file in tsconfig.json when "lib" has no
// "DOM" and @types/node is not installed; skip it otherwise (the DOM lib
// declares the same names, with more members than the host implements).
//
// Not available at all: Node built-ins (fs, node:*), process, Buffer, Intl,
// WeakRef, async generators are lowered by the bundler. Regexps with \p{...}
// compile but never match.

export {};

declare global {
  interface Console {
    log(...data: any[]): void;
    info(...data: any[]): void;
    debug(...data: any[]): void;
    trace(...data: any[]): void;
    warn(...data: any[]): void;
    error(...data: any[]): void;
    dir(item?: any): void;
    table(data?: any): void;
    assert(condition?: boolean, ...data: any[]): void;
    count(label?: string): void;
    countReset(label?: string): void;
    time(label?: string): void;
    timeLog(label?: string, ...data: any[]): void;
    timeEnd(label?: string): void;
    group(...data: any[]): void;
    groupCollapsed(...data: any[]): void;
    groupEnd(): void;
  }
  /** Writes to the server's log (log/info -> info, debug, warn, error). */
  var console: Console;

  /** Timers run while a tool call is in progress; they keep the call alive until they fire or are cleared. */
  function setTimeout<A extends any[]>(fn: (...args: A) => void, ms?: number, ...args: A): number;
  function clearTimeout(id: number | undefined): void;
  function setInterval<A extends any[]>(fn: (...args: A) => void, ms?: number, ...args: A): number;
  function clearInterval(id: number | undefined): void;
  function queueMicrotask(fn: () => void): void;
  function structuredClone<T>(value: T): T;
  function atob(data: string): string;
  function btoa(data: string): string;

  class TextEncoder {
    readonly encoding: 'utf-8';
    encode(input?: string): Uint8Array;
    encodeInto(input: string, dest: Uint8Array): { read: number; written: number };
  }
  class TextDecoder {
    constructor(label?: 'utf-8' | 'utf8', options?: { fatal?: boolean; ignoreBOM?: boolean });
    readonly encoding: 'utf-8';
    readonly fatal: boolean;
    readonly ignoreBOM: boolean;
    decode(input?: ArrayBuffer | ArrayBufferView): string;
  }

  var crypto: {
    randomUUID(): `${string}-${string}-${string}-${string}-${string}`;
    getRandomValues<T extends Int8Array | Uint8Array | Uint8ClampedArray | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array>(array: T): T;
  };

  class URLSearchParams implements Iterable<[string, string]> {
    constructor(init?: string | Record<string, string> | Iterable<[string, string]> | URLSearchParams);
    readonly size: number;
    append(name: string, value: string): void;
    delete(name: string, value?: string): void;
    get(name: string): string | null;
    getAll(name: string): string[];
    has(name: string, value?: string): boolean;
    set(name: string, value: string): void;
    sort(): void;
    forEach(fn: (value: string, key: string, parent: URLSearchParams) => void, thisArg?: any): void;
    keys(): IterableIterator<string>;
    values(): IterableIterator<string>;
    entries(): IterableIterator<[string, string]>;
    [Symbol.iterator](): IterableIterator<[string, string]>;
    toString(): string;
  }

  class URL {
    constructor(url: string | URL, base?: string | URL);
    static canParse(url: string | URL, base?: string | URL): boolean;
    static parse(url: string | URL, base?: string | URL): URL | null;
    href: string;
    readonly origin: string;
    protocol: string;
    username: string;
    password: string;
    host: string;
    hostname: string;
    port: string;
    pathname: string;
    search: string;
    readonly searchParams: URLSearchParams;
    hash: string;
    toString(): string;
    toJSON(): string;
  }

  class Headers implements Iterable<[string, string]> {
    constructor(init?: Headers | Record<string, string> | Iterable<[string, string]>);
    get(name: string): string | null;
    has(name: string): boolean;
    set(name: string, value: string): void;
    append(name: string, value: string): void;
    delete(name: string): void;
    forEach(fn: (value: string, name: string, parent: Headers) => void, thisArg?: any): void;
    keys(): IterableIterator<string>;
    values(): IterableIterator<string>;
    entries(): IterableIterator<[string, string]>;
    [Symbol.iterator](): IterableIterator<[string, string]>;
  }

  /** The same host fetch as ctx.fetch; only usable while a tool call runs. */
  function fetch(
    url: string | URL | { url: string },
    init?: import('./index').FetchInit,
  ): Promise<import('./index').FetchResponse>;
}
