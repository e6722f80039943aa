/**
 * Structured JSON logs on stderr. Callers pass only content-free fields: reason codes, counts,
 * durations, names of configured objects. Never a projection, token, query text or chunk content.
 */
type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level | 'silent', number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

function threshold(): number {
  const env = (process.env['FGENTIC_LOG_LEVEL'] ?? 'info') as Level | 'silent';
  return ORDER[env] ?? ORDER.info;
}

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(component: string): Logger {
  const emit = (level: Level, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[level] < threshold()) return;
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, component, msg, ...fields })}\n`);
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
  };
}
