-- Example data for the workspace in examples/workspace: three campaigns, a
-- dozen drafts in every status, their history, the posts already published,
-- the queue, metrics and a few contacts. Everything is dated so that answers
-- never depend on the day they are asked.
INSERT INTO meta (key, value) VALUES ('seeded_from', 'reference seed');

INSERT INTO campaigns (id, name, file, status, starts_on, ends_on) VALUES
 ('spring-launch',    'Spring launch of ReachWeaver 2.0', 'campaigns/spring-launch.yaml',    'running', '2026-03-02', '2026-03-20'),
 ('webinar-series',   'March webinar series',             'campaigns/webinar-series.yaml',   'planning', '2026-03-16', '2026-04-10'),
 ('customer-stories', 'Customer stories',                 'campaigns/customer-stories.json', 'running', '2026-02-23', '2026-03-27');

INSERT INTO drafts (id, campaign_id, channel, title, body, status, reply_to, flagged, created_on) VALUES
 ('d-0001', 'spring-launch', 'linkedin', 'Launch announcement',
  'ReachWeaver 2.0 is here. Plan a week of posts in one place, send each one for approval, and see what worked without exporting a single spreadsheet. Teams in our beta cut their weekly scheduling time from three hours to under one. Try it today: https://reachweaver.example/2-0',
  'published', NULL, 0, '2026-02-16'),
 ('d-0002', 'spring-launch', 'x', 'Launch on X',
  'ReachWeaver 2.0: plan, approve and measure your posts in one place. https://reachweaver.example/2-0 #ReachWeaver',
  'published', NULL, 0, '2026-02-16'),
 ('d-0003', 'spring-launch', 'bluesky', 'Launch on Bluesky',
  'ReachWeaver 2.0 is out. One calendar for every channel, approvals that say who asked and why, and numbers you can read at a glance. https://reachweaver.example/2-0',
  'scheduled', NULL, 0, '2026-02-17'),
 ('d-0004', 'spring-launch', 'mastodon', 'Launch on Mastodon',
  'ReachWeaver 2.0 is out: one calendar for every channel, approvals with context, and plain numbers. Release notes: https://reachweaver.example/notes/2-0 #ReachWeaver #SocialOps',
  'scheduled', NULL, 0, '2026-02-17'),
 ('d-0005', 'spring-launch', 'x', 'Launch follow-up',
  'A week with ReachWeaver 2.0: what teams scheduled first, and the approval rule everyone copied. https://reachweaver.example/blog/week-one',
  'awaiting_approval', NULL, 0, '2026-02-24'),
 ('d-0006', 'webinar-series', 'linkedin', 'Webinar invite',
  'Join our revolutionary webinar! Guaranteed to double your reach. Teams see 40% more engagement.',
  'flagged', NULL, 1, '2026-02-20'),
 ('d-0007', 'webinar-series', 'x', 'Webinar teaser',
  'Three short sessions in March on planning a month of posts in an afternoon. Dates soon.',
  'draft', NULL, 0, '2026-02-25'),
 ('d-0008', 'customer-stories', 'linkedin', 'Acme story',
  'Acme''s support team answers 30% more questions on social since moving to ReachWeaver (source: Acme support report, January 2026). Read how they did it: https://reachweaver.example/stories/acme',
  'approved', NULL, 0, '2026-02-19'),
 ('d-0009', 'customer-stories', 'x', 'Acme story on X',
  'How Acme answers more questions on social with the same team: https://reachweaver.example/stories/acme',
  'failed', NULL, 0, '2026-02-19'),
 ('d-0010', 'customer-stories', 'bluesky', 'Globex story',
  'Globex plans its whole quarter of posts in one afternoon. Here is their calendar, step by step: https://reachweaver.example/stories/globex',
  'paused', NULL, 0, '2026-02-22'),
 ('d-0011', 'spring-launch', 'linkedin', 'Launch thank-you',
  'Thank you to the 140 beta teams who told us what was missing. ReachWeaver 2.0 has your fingerprints all over it.',
  'awaiting_approval', NULL, 0, '2026-02-28'),
 ('d-0012', 'customer-stories', 'mastodon', 'Initech reply',
  'Initech''s team asked how we count engagement. Short answer: replies, reposts and clicks, never impressions alone.',
  'published', 'https://fosstodon.example/@initech/111', 0, '2026-02-23');

INSERT INTO events (id, draft_id, happened_at, kind, actor, detail) VALUES
 (1,  'd-0001', '2026-02-16T10:02:00Z', 'created',            'maya', 'from drafts/launch-announcement.txt'),
 (2,  'd-0001', '2026-02-16T10:02:01Z', 'checked',            'reachweaver', 'no findings'),
 (3,  'd-0001', '2026-02-18T09:00:00Z', 'approval_requested', 'maya', 'launch day post'),
 (4,  'd-0001', '2026-02-19T14:30:00Z', 'approved',           'dana', NULL),
 (5,  'd-0001', '2026-02-19T14:31:00Z', 'scheduled',          'dana', '2026-03-02T09:00'),
 (6,  'd-0001', '2026-03-02T09:00:01Z', 'published',          'reachweaver', 'p-0104'),
 (7,  'd-0002', '2026-02-16T10:05:00Z', 'created',            'maya', NULL),
 (8,  'd-0002', '2026-02-16T10:05:01Z', 'checked',            'reachweaver', 'no findings'),
 (9,  'd-0002', '2026-02-19T14:32:00Z', 'approved',           'dana', NULL),
 (10, 'd-0002', '2026-02-19T14:33:00Z', 'scheduled',          'dana', '2026-03-02T09:00'),
 (11, 'd-0002', '2026-03-02T09:00:02Z', 'published',          'reachweaver', 'p-0105'),
 (12, 'd-0003', '2026-02-17T11:00:00Z', 'created',            'sam', NULL),
 (13, 'd-0003', '2026-02-20T16:00:00Z', 'approved',           'dana', NULL),
 (14, 'd-0003', '2026-02-20T16:01:00Z', 'scheduled',          'dana', '2026-03-04T15:00'),
 (15, 'd-0004', '2026-02-17T11:10:00Z', 'created',            'sam', NULL),
 (16, 'd-0004', '2026-02-20T16:02:00Z', 'approved',           'dana', NULL),
 (17, 'd-0004', '2026-02-20T16:03:00Z', 'scheduled',          'dana', '2026-03-05T10:00'),
 (18, 'd-0005', '2026-02-24T08:45:00Z', 'created',            'maya', NULL),
 (19, 'd-0005', '2026-02-27T09:15:00Z', 'approval_requested', 'maya', 'follow-up for week one'),
 (20, 'd-0006', '2026-02-20T13:00:00Z', 'created',            'sam', 'from drafts/webinar-invite.txt'),
 (21, 'd-0006', '2026-02-20T13:00:01Z', 'flagged',            'reachweaver', 'claims: guaranteed, 40% without a source'),
 (22, 'd-0006', '2026-02-25T10:00:00Z', 'rejected',           'sam', 'unsupported claims'),
 (23, 'd-0007', '2026-02-25T15:20:00Z', 'created',            'sam', NULL),
 (24, 'd-0008', '2026-02-19T09:30:00Z', 'created',            'maya', NULL),
 (25, 'd-0008', '2026-02-19T09:30:01Z', 'checked',            'reachweaver', 'no findings'),
 (26, 'd-0008', '2026-02-26T11:00:00Z', 'approved',           'dana', NULL),
 (27, 'd-0008', '2026-02-26T11:01:00Z', 'scheduled',          'dana', '2026-03-10T09:00'),
 (28, 'd-0009', '2026-02-19T09:40:00Z', 'created',            'maya', NULL),
 (29, 'd-0009', '2026-02-26T11:02:00Z', 'approved',           'dana', NULL),
 (30, 'd-0009', '2026-02-26T11:03:00Z', 'scheduled',          'dana', '2026-03-03T12:00'),
 (31, 'd-0009', '2026-03-03T12:00:03Z', 'failed',             'reachweaver', 'x answered 403: duplicate content'),
 (32, 'd-0010', '2026-02-22T17:00:00Z', 'created',            'sam', NULL),
 (33, 'd-0010', '2026-02-26T11:04:00Z', 'approved',           'dana', NULL),
 (34, 'd-0010', '2026-02-26T11:05:00Z', 'scheduled',          'dana', '2026-03-12T16:00'),
 (35, 'd-0010', '2026-03-01T08:00:00Z', 'paused',             'dana', 'waiting for Globex sign-off'),
 (36, 'd-0011', '2026-02-28T12:00:00Z', 'created',            'maya', NULL),
 (37, 'd-0011', '2026-03-01T09:00:00Z', 'approval_requested', 'maya', NULL),
 (38, 'd-0012', '2026-02-23T16:40:00Z', 'created',            'sam', 'reply to a question'),
 (39, 'd-0012', '2026-02-24T09:00:00Z', 'approved',           'dana', NULL),
 (40, 'd-0012', '2026-02-27T10:00:02Z', 'published',          'reachweaver', 'p-0103');

INSERT INTO approvals (draft_id, requested_on, decided_on, decision, approver, note) VALUES
 ('d-0001', '2026-02-18', '2026-02-19', 'approved', 'dana', NULL),
 ('d-0005', '2026-02-27', NULL,         NULL,       NULL,   NULL),
 ('d-0006', '2026-02-21', '2026-02-25', 'rejected', 'sam',  'unsupported claims'),
 ('d-0008', '2026-02-20', '2026-02-26', 'approved', 'dana', NULL),
 ('d-0011', '2026-03-01', NULL,         NULL,       NULL,   NULL);

INSERT INTO schedule (draft_id, channel, slot, state) VALUES
 ('d-0001', 'linkedin', '2026-03-02T09:00', 'sent'),
 ('d-0002', 'x',        '2026-03-02T09:00', 'sent'),
 ('d-0009', 'x',        '2026-03-03T12:00', 'failed'),
 ('d-0003', 'bluesky',  '2026-03-04T15:00', 'queued'),
 ('d-0004', 'mastodon', '2026-03-05T10:00', 'queued'),
 ('d-0008', 'linkedin', '2026-03-10T09:00', 'queued'),
 ('d-0010', 'bluesky',  '2026-03-12T16:00', 'paused');

INSERT INTO posts (id, draft_id, channel, published_on, url, body) VALUES
 ('p-0101', NULL, 'linkedin', '2026-01-15', 'https://linkedin.example/posts/reachweaver-0101',
  'ReachWeaver 1.8 is out: approvals now show who asked and why, and the calendar lets you drag posts between days. Read the notes: https://reachweaver.example/notes/1-8'),
 ('p-0102', NULL, 'x', '2026-01-15', 'https://x.example/reachweaver/status/0102',
  'ReachWeaver 1.8 is out. Approvals show who asked and why; drag posts between days in the calendar. https://reachweaver.example/notes/1-8'),
 ('p-0103', 'd-0012', 'mastodon', '2026-02-27', 'https://fosstodon.example/@reachweaver/0103',
  'Initech''s team asked how we count engagement. Short answer: replies, reposts and clicks, never impressions alone.'),
 ('p-0104', 'd-0001', 'linkedin', '2026-03-02', 'https://linkedin.example/posts/reachweaver-0104',
  'ReachWeaver 2.0 is here. Plan a week of posts in one place, send each one for approval, and see what worked without exporting a single spreadsheet. Teams in our beta cut their weekly scheduling time from three hours to under one. Try it today: https://reachweaver.example/2-0'),
 ('p-0105', 'd-0002', 'x', '2026-03-02', 'https://x.example/reachweaver/status/0105',
  'ReachWeaver 2.0: plan, approve and measure your posts in one place. https://reachweaver.example/2-0 #ReachWeaver');

INSERT INTO metrics (post_id, day, impressions, engagements, clicks, replies) VALUES
 ('p-0101', '2026-01-15', 4200, 310,  95, 12),
 ('p-0101', '2026-01-16', 1800, 120,  40,  5),
 ('p-0102', '2026-01-15', 6100, 240, 130,  9),
 ('p-0102', '2026-01-16', 1500,  60,  22,  2),
 ('p-0103', '2026-02-27',  900,  85,  10, 14),
 ('p-0104', '2026-03-02', 8800, 720, 410, 31),
 ('p-0104', '2026-03-03', 3900, 260, 150, 11),
 ('p-0104', '2026-03-04', 1200,  70,  35,  3),
 ('p-0105', '2026-03-02', 9700, 380, 290, 17),
 ('p-0105', '2026-03-03', 2100,  90,  60,  4);

INSERT INTO engagers (post_id, handle, display_name, interactions) VALUES
 ('p-0104', 'jordan-lee',        'Jordan Lee',     4),
 ('p-0104', 'priya-n',           'Priya N.',       3),
 ('p-0105', '@opsnerd',          'Casey Ops',      5),
 ('p-0105', '@jordanlee',        'Jordan Lee',     2),
 ('p-0103', '@initech@fosstodon.example', 'Initech', 3);

INSERT INTO contacts (id, name, email, segment, handle) VALUES
 (1, 'Jordan Lee',  'jordan.lee@example.com',  'customer', 'jordan-lee'),
 (2, 'Priya Nair',  'priya.nair@example.org',  'customer', 'priya-n'),
 (3, 'Casey Brown', 'casey@example.net',       'prospect', '@opsnerd'),
 (4, 'Alex Kim',    'alex.kim@example.com',    'partner',  NULL),
 (5, 'Sam Ortiz',   'sam.ortiz@example.org',   'prospect', NULL);
