ALTER TABLE "cards" ALTER COLUMN "number" DROP NOT NULL;--> statement-breakpoint
-- Sealed products have no card number: null, not an empty string (docs/adr/0092-sealed-products-have-no-number.md).
UPDATE "cards" SET "number" = NULL WHERE "product_type" = 'Sealed Products' AND "number" = '';--> statement-breakpoint
-- Existing keys get their opaque id here; the integer id is no longer shown (docs/adr/0089-key-ids-are-opaque-strings.md).
ALTER TABLE "api_keys" ADD COLUMN "public_id" text;--> statement-breakpoint
UPDATE "api_keys" SET "public_id" = 'key_' || replace(gen_random_uuid()::text, '-', '');--> statement-breakpoint
ALTER TABLE "api_keys" ALTER COLUMN "public_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "games" ADD COLUMN "logo_url" text;--> statement-breakpoint
ALTER TABLE "sets" ADD COLUMN "set_icon_url" text;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_public_id_idx" ON "api_keys" USING btree ("public_id");
