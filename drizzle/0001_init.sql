CREATE TABLE "accounts" (
	"id" serial PRIMARY KEY NOT NULL,
	"email" text NOT NULL,
	"password_hash" text NOT NULL,
	"tier" text DEFAULT 'free' NOT NULL,
	"subscription_status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "api_keys" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"name" text NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"is_active" boolean DEFAULT true NOT NULL,
	"total_requests" bigint DEFAULT 0 NOT NULL,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "daily_usage" (
	"account_id" integer NOT NULL,
	"day" date NOT NULL,
	"requests" integer DEFAULT 0 NOT NULL,
	"rejected" integer DEFAULT 0 NOT NULL,
	"live_refreshes" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "daily_usage_account_id_day_pk" PRIMARY KEY("account_id","day")
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"token_hash" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "cards" (
	"id" serial PRIMARY KEY NOT NULL,
	"set_id" integer NOT NULL,
	"game_id" integer NOT NULL,
	"marketplace_id" integer NOT NULL,
	"name" text NOT NULL,
	"clean_name" text NOT NULL,
	"number" text NOT NULL,
	"rarity" text NOT NULL,
	"image_url" text NOT NULL,
	"marketplace_url" text NOT NULL,
	"product_type" text NOT NULL,
	"foil_only" smallint NOT NULL,
	"total_listings" integer NOT NULL,
	"shipping_category_id" smallint NOT NULL,
	"product_status_id" smallint NOT NULL,
	"hp" text,
	"custom_attributes" jsonb NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "cards_marketplace_id_unique" UNIQUE("marketplace_id")
);
--> statement-breakpoint
CREATE TABLE "games" (
	"id" serial PRIMARY KEY NOT NULL,
	"marketplace_category_id" integer NOT NULL,
	"name" text NOT NULL,
	"slug" text NOT NULL,
	"kind" text NOT NULL,
	"priority" smallint NOT NULL,
	"set_count" integer DEFAULT 0 NOT NULL,
	"card_count" integer DEFAULT 0 NOT NULL,
	"last_synced_at" timestamp with time zone,
	CONSTRAINT "games_marketplace_category_id_unique" UNIQUE("marketplace_category_id"),
	CONSTRAINT "games_slug_unique" UNIQUE("slug")
);
--> statement-breakpoint
CREATE TABLE "sets" (
	"id" serial PRIMARY KEY NOT NULL,
	"game_id" integer NOT NULL,
	"marketplace_group_id" integer NOT NULL,
	"name" text NOT NULL,
	"slug" text NOT NULL,
	"abbreviation" text NOT NULL,
	"release_date" date NOT NULL,
	"card_count" integer DEFAULT 0 NOT NULL,
	"last_synced_at" timestamp with time zone,
	CONSTRAINT "sets_marketplace_group_id_unique" UNIQUE("marketplace_group_id")
);
--> statement-breakpoint
CREATE TABLE "sync_runs" (
	"id" serial PRIMARY KEY NOT NULL,
	"game_id" integer,
	"price_date" text NOT NULL,
	"status" text NOT NULL,
	"stats" jsonb,
	"error" text,
	"started_at" timestamp with time zone NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "card_prices" (
	"card_id" integer NOT NULL,
	"printing" text NOT NULL,
	"market_price" double precision,
	"market_price_as_of" date,
	"low_price" double precision NOT NULL,
	"median_price" double precision NOT NULL,
	"lowest_with_shipping" double precision NOT NULL,
	"buylist_price" double precision,
	"price_change_24h" double precision,
	"price_change_7d" double precision,
	"price_change_30d" double precision,
	"last_updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "card_prices_card_id_printing_pk" PRIMARY KEY("card_id","printing")
);
--> statement-breakpoint
CREATE TABLE "condition_prices" (
	"card_id" integer NOT NULL,
	"printing" text NOT NULL,
	"condition" text NOT NULL,
	"language" text NOT NULL,
	"low_price" double precision NOT NULL,
	"lowest_with_shipping" double precision NOT NULL,
	"median_with_shipping" double precision,
	"sample_count" integer NOT NULL,
	"last_updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "condition_prices_card_id_printing_condition_language_pk" PRIMARY KEY("card_id","printing","condition","language")
);
--> statement-breakpoint
CREATE TABLE "price_history" (
	"card_id" integer NOT NULL,
	"printing" text NOT NULL,
	"date" date NOT NULL,
	"market_price" double precision NOT NULL,
	"low_price" double precision NOT NULL,
	"avg_sales_price" double precision,
	"sales_volume" integer,
	CONSTRAINT "price_history_card_id_printing_date_pk" PRIMARY KEY("card_id","printing","date")
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"webhook_id" integer NOT NULL,
	"event_id" text NOT NULL,
	"payload" jsonb NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_status_code" integer,
	"last_error" text,
	"delivered_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhooks" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"url" text NOT NULL,
	"card_id" integer NOT NULL,
	"condition" text NOT NULL,
	"threshold" double precision NOT NULL,
	"secret_ciphertext" text NOT NULL,
	"armed" boolean DEFAULT true NOT NULL,
	"last_price" double precision,
	"is_active" boolean DEFAULT true NOT NULL,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "daily_usage" ADD CONSTRAINT "daily_usage_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cards" ADD CONSTRAINT "cards_set_id_sets_id_fk" FOREIGN KEY ("set_id") REFERENCES "public"."sets"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cards" ADD CONSTRAINT "cards_game_id_games_id_fk" FOREIGN KEY ("game_id") REFERENCES "public"."games"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sets" ADD CONSTRAINT "sets_game_id_games_id_fk" FOREIGN KEY ("game_id") REFERENCES "public"."games"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sync_runs" ADD CONSTRAINT "sync_runs_game_id_games_id_fk" FOREIGN KEY ("game_id") REFERENCES "public"."games"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "card_prices" ADD CONSTRAINT "card_prices_card_id_cards_id_fk" FOREIGN KEY ("card_id") REFERENCES "public"."cards"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "condition_prices" ADD CONSTRAINT "condition_prices_card_id_cards_id_fk" FOREIGN KEY ("card_id") REFERENCES "public"."cards"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "price_history" ADD CONSTRAINT "price_history_card_id_cards_id_fk" FOREIGN KEY ("card_id") REFERENCES "public"."cards"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_card_id_cards_id_fk" FOREIGN KEY ("card_id") REFERENCES "public"."cards"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "accounts_email_idx" ON "accounts" USING btree ("email");--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_hash_idx" ON "api_keys" USING btree ("key_hash");--> statement-breakpoint
CREATE INDEX "api_keys_account_idx" ON "api_keys" USING btree ("account_id","id");--> statement-breakpoint
CREATE INDEX "api_keys_active_idx" ON "api_keys" USING btree ("account_id") WHERE "api_keys"."is_active";--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_token_hash_idx" ON "sessions" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "sessions_account_idx" ON "sessions" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "cards_set_number_idx" ON "cards" USING btree ("set_id","number","id");--> statement-breakpoint
CREATE INDEX "cards_game_type_idx" ON "cards" USING btree ("game_id","product_type");--> statement-breakpoint
CREATE INDEX "cards_clean_name_fts_idx" ON "cards" USING gin (to_tsvector('simple', "clean_name"));--> statement-breakpoint
CREATE INDEX "cards_clean_name_trgm_idx" ON "cards" USING gin ("clean_name" gin_trgm_ops);--> statement-breakpoint
CREATE UNIQUE INDEX "sets_game_slug_idx" ON "sets" USING btree ("game_id","slug");--> statement-breakpoint
CREATE INDEX "sets_game_release_idx" ON "sets" USING btree ("game_id","release_date" DESC NULLS LAST,"id");--> statement-breakpoint
CREATE INDEX "sync_runs_game_idx" ON "sync_runs" USING btree ("game_id","started_at");--> statement-breakpoint
CREATE INDEX "card_prices_updated_idx" ON "card_prices" USING btree ("last_updated_at");--> statement-breakpoint
CREATE INDEX "condition_prices_updated_idx" ON "condition_prices" USING btree ("last_updated_at");--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_deliveries_event_idx" ON "webhook_deliveries" USING btree ("event_id");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("next_attempt_at") WHERE "webhook_deliveries"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "webhooks_account_idx" ON "webhooks" USING btree ("account_id","id");--> statement-breakpoint
CREATE INDEX "webhooks_card_active_idx" ON "webhooks" USING btree ("card_id") WHERE "webhooks"."is_active";