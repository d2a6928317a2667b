ALTER TABLE "search_words" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP TABLE "search_words" CASCADE;--> statement-breakpoint
DROP INDEX "cards_clean_name_fts_idx";