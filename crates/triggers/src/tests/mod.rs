mod cron;
mod dst;
mod policy;
