CREATE TABLE "catalog_source" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"source" text NOT NULL,
	"recorded_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "marketplace_requests" (
	"day" date PRIMARY KEY NOT NULL,
	"requests" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "cards" ALTER COLUMN "total_listings" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "card_prices" ALTER COLUMN "low_price" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "card_prices" ALTER COLUMN "median_price" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "card_prices" ALTER COLUMN "lowest_with_shipping" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "price_history" ALTER COLUMN "low_price" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "games" ADD COLUMN "image_url" text;--> statement-breakpoint
ALTER TABLE "sets" ADD COLUMN "image_url" text;--> statement-breakpoint
ALTER TABLE "sets" ADD COLUMN "products_modified_on" text;--> statement-breakpoint
ALTER TABLE "job_runs" ADD COLUMN "rows_skipped" integer;--> statement-breakpoint
-- A catalog filled before sources were recorded was filled by the demo source, the only one that seeded.
INSERT INTO "catalog_source" ("id", "source", "recorded_at") SELECT 1, 'demo', now() WHERE EXISTS (SELECT 1 FROM "games");
