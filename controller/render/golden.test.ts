/** Golden file: the render of examples/ (regenerate with UPDATE_GOLDEN=1). Also: the render is deterministic. */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { examples, REPO } from '../../testkit/controller/fixtures.ts';
import { toYaml } from '../render-command.ts';
import { render } from './index.ts';

const GOLDEN = join(REPO, 'controller/testdata/examples.golden.yaml');

describe('render of examples/', () => {
  it('matches controller/testdata/examples.golden.yaml', () => {
    const { objects, conflicts } = render(examples());
    assert.deepEqual(conflicts, []);
    const text = toYaml(objects);
    assert.doesNotMatch(text, /(^|\s)[&*]a\d+\b/, 'no YAML anchors or aliases');
    if (process.env['UPDATE_GOLDEN'] === '1') writeFileSync(GOLDEN, text);
    assert.equal(text, readFileSync(GOLDEN, 'utf8'), 'render changed: review, then UPDATE_GOLDEN=1');
  });

  it('is independent of input order', () => {
    const a = examples();
    const b = examples();
    b.rooms.reverse();
    b.partners.reverse();
    b.agents.reverse();
    assert.equal(toYaml(render(b).objects), toYaml(render(a).objects));
  });

  it('does not mutate its input', () => {
    const a = examples();
    const before = JSON.stringify(a);
    render(a);
    assert.equal(JSON.stringify(a), before);
  });
});
