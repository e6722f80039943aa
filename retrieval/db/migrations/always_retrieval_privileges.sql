-- Runs at the end of every `migrate`, after the versioned files. The origin's v1 Job grants the
-- retrieval role SELECT on knowledge.chunks each time it runs (Flux may replay it); the function path
-- needs that grant gone, so every migration run takes it away again. The server also refuses to start
-- while its role holds any privilege on the table (retrieval/db/roles.ts assertServingPrivileges).
REVOKE ALL ON knowledge.chunks FROM knowledge_retrieval;
