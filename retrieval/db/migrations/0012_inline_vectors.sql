-- Vectors stored in the row (docs/filtered-search.md, "Storage"). pgvector declares its types with
-- STORAGE external, so a 1024-d vector (4,104 bytes) never stays in a row above the default TOAST
-- threshold (~2 KB): every row kept it out of line, about three TOAST pages away, and the exact path
-- spent most of its time fetching and reassembling those pages for each authorized row.
--   - MAIN keeps the vector in the row and moves it out of line only as a last resort, after the
--     other wide columns (content, metadata) have been compressed or moved out; unlike
--     PLAIN it never makes a row too large to store, whatever the dimension.
--   - toast_tuple_target at its maximum (8160): a row is toasted only when it no longer fits a page,
--     so short content stays in the row next to its vector.
-- Neither statement rewrites the table: rows written before this migration keep their out-of-line
-- vectors until the owner rewrites them (VACUUM FULL knowledge.chunks, or a re-ingest of the
-- corpus; docs/filtered-search.md, "Storage"). Column types, values and the origin's SQL are unchanged.
ALTER TABLE knowledge.chunks SET (toast_tuple_target = 8160);
ALTER TABLE knowledge.chunks ALTER COLUMN embedding SET STORAGE MAIN;
