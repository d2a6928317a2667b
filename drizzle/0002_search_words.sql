CREATE TABLE "search_words" (
	"word" text PRIMARY KEY NOT NULL
);
--> statement-breakpoint
CREATE INDEX "search_words_trgm_idx" ON "search_words" USING gin ("word" gin_trgm_ops);--> statement-breakpoint
INSERT INTO "search_words" ("word")
SELECT DISTINCT w FROM "cards", unnest(string_to_array("clean_name", ' ')) AS w WHERE w <> ''
ON CONFLICT DO NOTHING;
