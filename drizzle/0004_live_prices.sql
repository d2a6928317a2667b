CREATE TABLE "job_runs" (
	"id" serial PRIMARY KEY NOT NULL,
	"job" text NOT NULL,
	"scheduled_for" timestamp with time zone NOT NULL,
	"games" jsonb NOT NULL,
	"outcome" text NOT NULL,
	"rows_changed" integer,
	"error" text,
	"started_at" timestamp with time zone NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "condition_refreshes" (
	"card_id" integer PRIMARY KEY NOT NULL,
	"refreshed_at" timestamp with time zone NOT NULL,
	"condition_counts" jsonb NOT NULL
);
--> statement-breakpoint
ALTER TABLE "condition_refreshes" ADD CONSTRAINT "condition_refreshes_card_id_cards_id_fk" FOREIGN KEY ("card_id") REFERENCES "public"."cards"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "job_runs_job_idx" ON "job_runs" USING btree ("job","scheduled_for");--> statement-breakpoint
CREATE INDEX "condition_refreshes_at_idx" ON "condition_refreshes" USING btree ("refreshed_at");