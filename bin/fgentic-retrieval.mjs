#!/usr/bin/env node
// Binary shim: run the TypeScript CLI through tsx's loader.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
