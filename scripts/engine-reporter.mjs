// node:test's spec reporter, with the database engine in the name of every test of a file that runs
// on the engine matrix (scripts/run-tests.ts sets both variables), so the output says which engine
// each database test ran on.
import { Readable } from 'node:stream';
import { spec } from 'node:test/reporters';

const engine = process.env.FGENTIC_TEST_ENGINE_LABEL;
const files = new Set(JSON.parse(process.env.FGENTIC_TEST_ENGINE_FILES ?? '[]'));

function relabel(event) {
  const data = event?.data;
  if (!engine || !data || typeof data.name !== 'string' || !files.has(data.file)) return event;
  return { ...event, data: { ...data, name: `[${engine}] ${data.name}` } };
}

export default async function* engineSpec(source) {
  const out = Readable.from(
    (async function* () {
      for await (const event of source) yield relabel(event);
    })(),
  ).pipe(spec());
  yield* out;
}
